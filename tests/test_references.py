"""Code paths of the references that the smoke workloads do not reach, under the interpreter."""

import subprocess
import sys
import textwrap

from d2k_env.task import project_root

SCRIPT = textwrap.dedent("""
    import importlib.util, sys, torch
    from d2k_env.evaluator import interpreter_patch
    interpreter_patch.apply()
    from d2k_env.evaluator.checking import allclose_check
    from d2k_env.task import load_task

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    task = load_task("fused_add_rmsnorm")
    ref = load(task.reference_path, "ref")
    base = load(task.baseline_path, "base")
    ref.CHUNK, ref.TWO_PASS_MIN_ROWS = 128, 4  # small shapes take the two-pass path
    launched = []
    for name in ("_rmsnorm_one_pass", "_rmsnorm_two_pass"):
        kernel = getattr(ref, name)
        run = kernel.run
        kernel.run = lambda *a, _n=name, _run=run, **k: (launched.append(_n), _run(*a, **k))[1]
    for M, N in [(8, 256), (6, 384), (3, 256), (8, 200)]:
        gen = torch.Generator().manual_seed(M * N)
        inputs = task.make_inputs(task.smoke_workloads[0].__class__("x", {"M": M, "N": N}), gen, "cpu")
        verdict = allclose_check(ref.forward(*inputs), base.forward(*inputs), task.outputs)
        assert verdict.ok, (M, N, verdict.message)
    assert launched == ["_rmsnorm_two_pass", "_rmsnorm_two_pass", "_rmsnorm_one_pass", "_rmsnorm_one_pass"], launched
    print("ok")
""")


def test_rmsnorm_two_pass_and_one_pass_paths_match_the_baseline():
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(project_root()), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
