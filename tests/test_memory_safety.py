"""Memory safety (issue 11, item 5): guard bands around the harness's inputs on both backends, and
on the GPU the held-out shapes of ``submit`` under compute-sanitizer memcheck, layer by layer. The
exploits are tests/security/memory_safety/ (each must score 0 with [out-of-bounds]), evaluated by
tests/test_security.py."""

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from d2k_env.evaluator import memcheck_problem
from d2k_env.evaluator.guard_bands import BAND_BYTES, band_problem, guard, guard_inputs, usable_span
from d2k_env.evaluator.memcheck import MEMCHECK_EXIT, MemcheckTool, first_report
from d2k_env.evaluator.protocol import EvalRequest, EvalResult, WorkloadResult
from d2k_env.evaluator.sandbox import PhaseLimits, WorkerOutcome, run_worker
from d2k_env.task import load_task

QUANT = "per_token_group_quant_fp8"


def _gen(seed: int = 0) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


# -- guard bands ------------------------------------------------------------------------------------

def test_guarded_copy_is_the_input_and_bands_start_intact():
    x = torch.randn(5, 7, dtype=torch.float32)[:, 1:6]  # a strided view: strides are kept
    copy, band = guard(x, "x", _gen())
    assert copy.dtype == x.dtype and copy.shape == x.shape and copy.stride() == x.stride()
    assert torch.equal(copy, x) and copy.data_ptr() % 16 == 0
    assert band.problem() is None
    assert usable_span(band.buffer.data_ptr()) == (copy.data_ptr(), copy.data_ptr() + (4 * 7 + 5) * 4)


@pytest.mark.parametrize("side", ["before", "after"])
def test_a_changed_band_names_the_input_and_the_side(side):
    (x, w), bands = guard_inputs((torch.zeros(8, dtype=torch.bfloat16), torch.ones(3)), ["x", "weight"], _gen())
    # Whatever a stray store writes, a random pattern is very unlikely to hold it already.
    bands[1].buffer[BAND_BYTES - 1 if side == "before" else -BAND_BYTES] ^= 0xFF
    problem = band_problem(bands)
    assert problem.startswith("[out-of-bounds]") and "'weight'" in problem and f"bytes {side} it" in problem
    assert bands[0].problem() is None


def test_band_patterns_come_from_the_key():
    a = guard(torch.zeros(4), "x", _gen(1))[1].pattern
    assert torch.equal(a, guard(torch.zeros(4), "x", _gen(1))[1].pattern)
    assert not torch.equal(a, guard(torch.zeros(4), "x", _gen(2))[1].pattern)


def test_other_values_pass_through_unguarded():
    inputs, bands = guard_inputs((torch.zeros(2), 3, "s", torch.zeros(0)), ["a", "b", "c", "d"], _gen())
    assert inputs[1:3] == (3, "s") and len(bands) == 2 and inputs[3].numel() == 0


def test_interpreter_refuses_a_store_past_a_guarded_input_and_lets_a_stretched_view_reach_the_band():
    """The interpreter's own bounds: a guarded input ends where the input ends (the band is not an
    argument's memory), unless the launch was given a view stretched into it: then the band sees it."""
    import subprocess
    script = """
import torch, triton, triton.language as tl
from d2k_env.evaluator import interpreter_patch
from d2k_env.evaluator.guard_bands import guard
interpreter_patch.apply()
@triton.jit
def k(p, start, BLOCK: tl.constexpr):
    tl.store(p + start + tl.arange(0, BLOCK), tl.zeros([BLOCK], dtype=tl.float32))
g = torch.Generator(); g.manual_seed(0)
x, band = guard(torch.ones(64), "x", g)
try:
    k[(1,)](x, 64, BLOCK=8)
    print("store allowed")
except Exception as exc:
    print("refused", "[out-of-bounds]" in str(exc))
print("band", band.problem() is None)
k[(1,)](x.as_strided((72,), (1,)), 64, BLOCK=8)
print("stretched", band.problem())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    lines = out.stdout.splitlines()
    assert lines[:2] == ["refused True", "band True"], out.stdout + out.stderr[-2000:]
    assert lines[2].startswith("stretched [out-of-bounds]") and "'x'" in lines[2] and "after it" in lines[2]


# -- the memory checker's plumbing, on the CPU with a stand-in for compute-sanitizer ------------------

_STAND_IN = """#!{python}
# Runs the program after the options (each takes one value), as compute-sanitizer does, inheriting
# every descriptor; reports like memcheck when MODE is "errors", or dies when MODE is "killed".
import os, subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
i = 0
while args[i].startswith("--"):
    i += 2
code = subprocess.call(args[i:], close_fds=False)
with open(log, "w") as f:
    f.write("========= COMPUTE-SANITIZER\\n")
    if "{mode}" == "errors":
        f.write("========= Invalid __global__ write of size 4 bytes\\n=========     at _quant+0x90\\n")
        f.write("========= ERROR SUMMARY: 1 error\\n")
        sys.exit({exit})
if "{mode}" == "killed":
    os.kill(os.getpid(), 9)
sys.exit(code)
"""


def _stand_in(mode: str) -> tuple[MemcheckTool, str]:
    root = tempfile.mkdtemp(prefix="d2k-fake-sanitizer-")
    os.chmod(root, 0o755)
    os.mkdir(os.path.join(root, "bin"))
    path = os.path.join(root, "bin", "compute-sanitizer")
    Path(path).write_text(_STAND_IN.format(python=sys.executable, mode=mode, exit=MEMCHECK_EXIT))
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return MemcheckTool(path, "stand-in", frozenset({"--launch-timeout", "--port", "--max-connections"})), root


@pytest.mark.parametrize("mode", ["clean", "errors", "killed"])
def test_a_worker_under_the_checker_keeps_its_sandbox_and_the_exit_status_decides(mode, tmp_path):
    """The supervisor starts the worker through the checker, confined alike (the checker under the
    same user, limits and cgroup; the worker's own process applies Landlock before it execs Python,
    and installs seccomp), waits for the checker to exit after the worker, and the verdict follows
    the checker's exit status, never its log alone."""
    tool, root = _stand_in(mode)
    task = load_task(QUANT)
    try:
        outputs = tmp_path / "outputs"
        outputs.mkdir()
        os.chmod(tmp_path, 0o755)
        from d2k_env.evaluator import snapshot_task
        req = EvalRequest(task_id=task.id, root=str(snapshot_task(task, tmp_path / "run")),
                          solution_path=str(task.reference_path), solution_source=task.reference_path.read_text(),
                          mode="test", device="cpu", workloads=[task.smoke_workloads[0].name], smoke=True, seed=1,
                          outputs_dir=str(outputs), nonce="n" * 32, memcheck=True)
        outcome = run_worker(req, limits=PhaseLimits(), triton_cache=tmp_path / "cache", interpret=True,
                             memcheck=tool)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert outcome.result is not None, outcome.output
    run = EvalResult.from_dict(outcome.result)
    assert run.correct and run.sandbox["seccomp"].startswith("52 calls refused"), run
    if "ABI" in outcome.layers["landlock"]:
        assert "applied by the worker's own process" in outcome.layers["landlock"], outcome.layers
        if int(outcome.layers["landlock"].split()[1]) >= 4:
            assert "TCP only on ports" in outcome.layers["landlock"], outcome.layers
    problem = memcheck_problem(req, outcome, run)
    if mode == "clean":
        assert outcome.returncode == 0 and problem is None, (outcome.returncode, outcome.output)
    elif mode == "errors":
        assert outcome.returncode == MEMCHECK_EXIT
        assert problem == ("[out-of-bounds] compute-sanitizer memcheck on the held-out shapes: Invalid __global__ "
                           "write of size 4 bytes (at _quant+0x90)"), problem
    else:
        assert problem.startswith("the held-out shapes did not run to the end under compute-sanitizer"), problem


def test_the_first_report_line_of_a_memcheck_log():
    log = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 2 bytes\n"
           "=========     at _k+0x1c0 in /tmp/solution.py:12\n=========     by thread (3,0,0) in block (9,0,0)\n"
           "=========     Address 0x7f00 is out of bounds\n========= ERROR SUMMARY: 4 errors\n")
    assert first_report(log) == "Invalid __global__ read of size 2 bytes (at _k+0x1c0 in /tmp/solution.py:12)"
    assert "unreadable" in first_report("")


def test_a_forged_log_without_the_exit_status_is_no_verdict():
    """The log is in the worker's scratch, which the solution can write: it never decides alone."""
    req = EvalRequest(task_id=QUANT, root="", solution_path="", mode="test", device="cuda", workloads=[],
                      smoke=False, seed=0)
    run = EvalResult("test", "cuda", [WorkloadResult("held-out 1x128", True, "ok")])
    outcome = WorkerOutcome({}, "", 0, None, memcheck_log="========= Invalid __global__ write of size 4 bytes\n")
    assert memcheck_problem(req, outcome, run) is None
