"""Code paths of the references that the smoke workloads do not reach, under the interpreter."""

import subprocess
import sys
import textwrap

from d2k_env.task import project_root

SCRIPT = textwrap.dedent("""
    import importlib.util, sys, torch
    from d2k_env.evaluator import interpreter_patch
    interpreter_patch.apply()
    from d2k_env.task import load_task

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    task = load_task("fused_add_rmsnorm")
    ref = load(task.reference_path, "ref")
    base = load(task.baseline_path, "base")
    ref.CHUNK = 128  # small rows walk several chunks, the last one partial where 128 does not divide N
    for M, N in [(8, 256), (6, 384), (8, 200), (3, 1000), (2, 64)]:
        gen = torch.Generator().manual_seed(M * N)
        inputs = task.make_inputs(task.smoke_workloads[0].__class__("x", {"M": M, "N": N}), gen, "cpu")
        verdict = task.checker(ref.forward(*inputs), base.forward(*inputs), inputs)
        assert verdict.ok, (M, N, verdict.message)
    print("ok")
""")


def test_rmsnorm_rows_of_several_chunks_match_the_baseline():
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(project_root()), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
