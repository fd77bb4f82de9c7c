"""Code paths of the references that the smoke workloads do not reach, under the interpreter."""

import subprocess
import sys
import textwrap

from d2k_env.task import project_root

# Each script runs in a fresh interpreter process with Triton's interpreter patched as the evaluator's is,
# and loads a task's reference and baseline as plain modules.
PRELUDE = textwrap.dedent("""
    import importlib.util, sys, torch
    from d2k_env.evaluator import interpreter_patch
    interpreter_patch.apply()
    from d2k_env.task import load_task

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

""")


def run_script(script: str) -> None:
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(project_root()), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


SCRIPT = PRELUDE + textwrap.dedent("""
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
    run_script(SCRIPT)


AWQ_SCRIPT = PRELUDE + textwrap.dedent("""
    from d2k_env.tasks import Workload
    task = load_task("awq_w4a16_gemm")
    ref = load(task.reference_path, "ref")
    base = load(task.baseline_path, "base")
    calls = []
    for name in ("fused_forward", "dequantised_forward"):  # which path forward takes
        path = getattr(ref, name)
        setattr(ref, name, lambda *a, path=path, name=name, **kw: calls.append(name) or path(*a, **kw))

    def check(M, K, N, run):
        gen = torch.Generator().manual_seed(M + K + N)
        inputs = task.make_inputs(Workload("x", {"M": M, "K": K, "N": N}), gen, "cpu")
        verdict = task.checker((run(*inputs),), (base.forward(*inputs),), inputs)
        assert verdict.ok, (M, K, N, verdict.message)
        return inputs

    # From the threshold on (16 rows: the GPU measured the dequantise-once path faster at every M it
    # timed from 64 up) forward takes the dequantise-once path, here with ragged N (a partial column tile
    # and a partial row tile); one row fewer (decode), the fused one.
    assert ref.DEQUANT_FROM_ROWS == 16
    check(ref.DEQUANT_FROM_ROWS, 256, 40, ref.forward)
    check(ref.DEQUANT_FROM_ROWS - 1, 128, 24, ref.forward)
    assert calls == ["dequantised_forward", "fused_forward"], calls
    # The fused kernel stays right at any M (the benchmark times it across the switch): past a row tile.
    check(70, 256, 40, ref.fused_forward)
    # The dequantise-once path on the smoke shapes (fewer rows than one tile, several groups) ...
    for w in task.smoke_workloads:
        check(w.params["M"], w.params["K"], w.params["N"], ref.dequantised_forward)
    # ... with its square tile, and its matrix equal to the baseline's dequantised weights bit for bit.
    x, qweight, qzeros, scales = check(70, 384, 264, lambda *a: ref.dequantised_forward(*a, cfg=ref.GEMM_SQUARE))
    eager = (base.unpack(qweight) - base.unpack(qzeros).repeat_interleave(128, 0)).to(torch.float16)
    assert torch.equal(ref.dequantise(qweight, qzeros, scales), eager * scales.repeat_interleave(128, 0))
    print("ok")
""")


def test_awq_large_batches_dequantise_once_and_match_the_baseline():
    run_script(AWQ_SCRIPT)
