"""The escaped-solution suite: every case of tests/escapes/cases.py through a real Evaluator, policy bypassed.

The static policy is assumed passed (issue 25): each case's Python runs as arbitrary code in the
solution process, so the evaluator's ``check_solution`` is made to find nothing, as
benchmarks/honest_corpus.py does. On the interpreter each case is a ``submit`` on its task's
smallest smoke workload (and the held-out shapes a submit adds); on the GPU (marked ``gpu``) a
``submit`` on the task's first workload. Every case must score 0, or, where the honest kernel does
the work and the escape can only change nothing, no more than that honest kernel earns (see the
table's docstring for ``ZERO``, ``NO_GAIN``, ``ZERO_IF_REACHED``). The honest kernel each case wraps
is evaluated too, wrapped the same way: it must be paid, so a 0 is the escape failing.

Today the solution process holds the harness (its run object, channel, guard, timers and inputs
key), so many cases are paid: the module is skipped until the trusted ``replay`` worker exists
(``d2k_env.evaluator.replay``). ``D2K_ESCAPES=1`` runs it anyway, to measure the "before".
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

import d2k_env.evaluator
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.evaluator.baseline_check import BaselineTimes
from d2k_env.reward import submission_reward
from d2k_env.task import load_task, task_ids
from escapes.cases import CASES, LIED, NO_GAIN, REACHED, ZERO, ZERO_IF_REACHED, Case, honest_source

BOUNDARY = importlib.util.find_spec("d2k_env.evaluator.replay") is not None
pytestmark = pytest.mark.skipif(
    not BOUNDARY and os.environ.get("D2K_ESCAPES") != "1",
    reason="the trust boundary (d2k_env.evaluator.replay) has not landed: today the solution process holds the "
           "harness, and many escapes are paid (D2K_ESCAPES=1 runs them anyway)")

SEED = 1  # fixed: every case's inputs and held-out shapes are the same on every run
LIMITS = PhaseLimits({"load": 300, "check": 300, "verify": 300}, default=300)  # a loaded 2-core machine
# On the GPU a NO_GAIN case is compared with the honest kernel's own submission, timed separately:
# a reward this many times the honest one is a gain, not noise (separate runs of one kernel move a
# launch-bound workload's speedup by up to 9%, ../shared/MEASURING.md).
GPU_NOISE = 1.2


class Lab:
    """Evaluators per (task, backend), the honest kernels' results, and a directory per evaluation."""

    def __init__(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="d2k-escapes-"))
        self.evaluators: dict[tuple[str, str], Evaluator] = {}
        # The lab's own baseline medians (the honest kernels' first): a forged baseline time never
        # reaches the user's cache, where it would skew later evaluations on the machine.
        self.baseline_times = BaselineTimes(self.tmp / "baseline-times.json")
        self.honest: dict[tuple[str, str], object] = {}
        self.lock = threading.Lock()

    def evaluator(self, task_id: str, backend: str) -> Evaluator:
        with self.lock:
            if (task_id, backend) not in self.evaluators:
                self.evaluators[task_id, backend] = Evaluator(load_task(task_id), backend, limits=LIMITS,
                                                              baseline_times=self.baseline_times)
            return self.evaluators[task_id, backend]

    def file(self, name: str, source: str) -> Path:
        path = self.tmp / name / "solution.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def honest_result(self, task_id: str, backend: str):
        key = (task_id, backend)
        if key not in self.honest:
            self.honest[key] = submit(self.evaluator(task_id, backend), self.file(f"honest-{task_id}-{backend}",
                                                                                  honest_source(task_id)))
        return self.honest[key]

    def close(self) -> None:
        for ev in self.evaluators.values():
            ev.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def workload(task_id: str, backend: str) -> str:
    """The interpreter's smallest smoke workload, or the GPU's first workload."""
    task = load_task(task_id)
    if backend == "cuda":
        return task.workloads[0].name

    def size(w):
        n = 1
        for v in w.params.values():
            n *= v
        return n

    return min(task.smoke_workloads, key=size).name


def submit(ev: Evaluator, path: Path):
    backend = "cuda" if ev.can_time else "interpreter"
    return ev.evaluate(path, "submit", workloads=[workload(ev.task.id, backend)], seed=SEED)


@pytest.fixture(scope="module")
def lab():
    with pytest.MonkeyPatch.context() as mp:
        # The evaluator reads check_solution from its module at each call: the policy is bypassed there.
        mp.setattr(d2k_env.evaluator, "check_solution", lambda *args, **kwargs: [])
        lab = Lab()
        try:
            yield lab
        finally:
            lab.close()


def verdict(result) -> str:
    """The result in a few lines: error or each workload's verdict, and what the escape reached."""
    lines = [f"error: {result.error.strip()[:400]}"] if result.error else []
    lines += [f"{w.name}: {'correct' if w.correct else 'wrong'}: {w.message.strip()[:200]}" for w in result.workloads]
    lines += [line for line in result.output.splitlines() if line.startswith(REACHED)]
    return "\n".join(lines)


def reached(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(REACHED)]


def run_case(lab: Lab, case: Case, backend: str) -> None:
    honest = lab.honest_result(case.task, backend)
    honest_reward = submission_reward("speedup", honest)
    assert honest_reward > 0, f"the honest kernel of {case.task} is not paid:\n{verdict(honest)}"
    if case.honest_after:
        ev = Evaluator(load_task(case.task), backend, limits=LIMITS, pool=lab.evaluator(case.task, backend).pool,
                       baseline_times=lab.baseline_times)
    else:
        ev = lab.evaluator(case.task, backend)
    try:
        result = submit(ev, lab.file(f"{case.name}-{backend}", case.source()))
        reward = submission_reward("speedup", result)
        told = f"{case.name} ({case.tries}) earned {reward:.4g} (the honest kernel {honest_reward:.4g}):\n" \
               f"{verdict(result)}"
        print(told)  # the "before" of a passing case too (pytest -rP shows it)
        lied = case.must == ZERO_IF_REACHED and any(line.startswith(LIED) for line in reached(result))
        if case.must == ZERO or lied:
            assert reward == 0, told
        else:
            assert case.must in (NO_GAIN, ZERO_IF_REACHED)
            limit = honest_reward * (GPU_NOISE if backend == "cuda" else 1)
            assert reward <= limit, told
        if case.honest_after:
            after = submit(ev, lab.file(f"{case.name}-{backend}-after", honest_source(case.task)))
            assert submission_reward("speedup", after) > 0, \
                f"after {case.name}, the honest kernel on the same evaluator is not paid:\n{verdict(after)}"
    finally:
        if case.honest_after:
            ev.close()


def test_the_table_names_shipped_tasks_and_known_outcomes():
    for case in CASES:
        assert case.task in task_ids(), case.name
        assert case.must in (ZERO, NO_GAIN, ZERO_IF_REACHED), case.name
        compile(case.source(), f"{case.name}.py", "exec")


@pytest.mark.parametrize("task_id", sorted({case.task for case in CASES}))
def test_the_honest_kernel_each_case_wraps_is_paid(lab, task_id):
    result = lab.honest_result(task_id, "interpreter")
    assert submission_reward("speedup", result) == 1.0, verdict(result)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_escape_fails_on_the_interpreter(lab, case):
    run_case(lab, case, "interpreter")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_escape_fails_on_the_gpu(lab, case):
    run_case(lab, case, "cuda")


LIES = {  # case: what a recorder must have heard (checked by the probe below)
    "recorder_told_huge_grid": "any(grid == (2**31 - 1, 65535, 65535) for _, grid, _ in heard)",
    "recorder_told_foreign_kernel_name": "any(name == '_not_in_the_source' for name, _, _ in heard)",
    "recorder_told_pointer_outside": "any(args[0] == x.data_ptr() - 2048 for _, _, args in heard)",
    "recorder_told_changing_scalar": "len({args[5] for _, _, args in heard}) == 2",
}

PROBE = '''
import importlib.util, sys, torch
from triton.runtime import interpreter
from d2k_env.task import load_task

heard = []


def make(run):  # a launch recorder as the harness might install one: a closure over what it wraps
    def recorder(kernel, *args, **kwargs):
        heard.append((kernel.fn.__name__, kwargs.get("grid"),
                      [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]))
        return run(kernel, *args, **kwargs)
    recorder.__module__ = "d2k_env.evaluator.recorder_probe"
    return recorder


interpreter.InterpretedFunction.run = make(interpreter.InterpretedFunction.run)
spec = importlib.util.spec_from_file_location("solution", sys.argv[0].replace("probe.py", "solution.py"))
solution = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solution)
task = load_task("fused_add_rmsnorm")
w = task.smoke_workloads[0]
x, residual, weight = task.make_inputs(w, torch.Generator().manual_seed(1), "cpu")
banded = torch.empty(4096 + x.numel(), dtype=x.dtype)[4096:].view(x.shape)  # room before it, as the guard band
banded.copy_(x)
x = banded
for _ in range(2):
    outputs = solution.forward(x, residual, weight)
    verdict = task.checker(outputs, solution._ESC["torch_forward"](x, residual, weight), (x, residual, weight))
    assert verdict.ok, verdict.message
assert {lie}, heard
print("HEARD", len(heard))
'''


@pytest.mark.parametrize("name", sorted(LIES))
def test_a_closure_recorder_hears_each_lie_while_the_outputs_stay_right(name, tmp_path, interpreted):
    """The recorder_told_* cases lie to any harness wrapper of Triton's launch that closes over what it
    wraps, as a launch recorder would: checked with a stand-in recorder, in a process of its own."""
    case = next(c for c in CASES if c.name == name)
    (tmp_path / "solution.py").write_text(case.source())
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.replace("{lie}", LIES[name]))
    proc = interpreted.run(probe, timeout=120)
    assert proc.returncode == 0 and "HEARD" in proc.stdout, proc.stdout + proc.stderr
    assert LIED in proc.stdout, proc.stdout
