"""A GPU submission's memory-checked run, as the evaluator orchestrates it, on the CPU: the workers
are stubs that say what each run found, so the order and the rules are checked without a GPU.

The rules: the memory-checked run (the held-out shapes under compute-sanitizer) starts once the
solution run's own verdicts pass the published shapes, and runs beside the check process; its
finding counts only when the check also passes the published shapes; without the tool the result
says so. The real run on the H200 is tests/test_security.py's ``gpu-memcheck`` case.
"""

import threading

import pytest

import d2k_env.evaluator as evaluator_module
from d2k_env.evaluator import Evaluator
from d2k_env.evaluator.memcheck import ABSENT, MEMCHECK_EXIT, MemcheckTool
from d2k_env.evaluator.pool import MEMCHECK
from d2k_env.evaluator.protocol import EvalResult, WorkloadResult
from d2k_env.evaluator.sandbox import WorkerOutcome
from d2k_env.task import load_task

WAIT_S = 10.0  # how long the stubbed check waits for the memory-checked run to be under way
OOB_LOG = "========= Invalid __global__ write of size 2 bytes\n=========     at _rms_kernel+0x1d0\n"


class StubWorker:
    def __init__(self, tmp_path):
        self.outputs_dir, self.closed = tmp_path, False

    def close(self):
        self.closed = True


class StagedEvaluator(Evaluator):
    """The GPU submit path, with each worker's verdict given: ``solution_fails`` and ``check_fails``
    name published workloads that run gets wrong; ``out_of_bounds`` makes the memory-checked run
    report an invalid access. The check waits for the memory-checked run to be under way where
    ``overlap`` says it should be (``check_saw_memcheck``: whether it was, before the check ended);
    ``memcheck_runs`` counts the memory-checked runs."""

    can_time = True

    def __init__(self, tmp_path, solution_fails=(), check_fails=(), out_of_bounds=False, overlap=False):
        super().__init__(load_task("fused_add_rmsnorm"), "interpreter")
        self.tmp_path, self.solution_fails, self.check_fails = tmp_path, set(solution_fails), set(check_fails)
        self.out_of_bounds, self.overlap, self.workers = out_of_bounds, overlap, []
        self.memcheck_running, self.check_saw_memcheck, self.memcheck_runs = threading.Event(), None, 0
        self.pool.take = self._take

    def _worker(self):
        self.workers.append(StubWorker(self.tmp_path))
        return self.workers[-1]

    def _take(self, kind):
        assert kind == MEMCHECK
        return self._worker(), True

    def _run(self, req, outputs=None):
        names = req.workloads + [w["name"] for w in req.heldout]
        failing = self.solution_fails if req.role == "solution" else self.check_fails
        if req.role == "check":
            # Sequential code starts the memory-checked run only after this returns: the wait runs out.
            self.check_saw_memcheck = self.memcheck_running.wait(WAIT_S if self.overlap else 0)
        workloads = [WorkloadResult(n, n not in failing, "wrong values" if n in failing else "") for n in names]
        return EvalResult(req.mode, "cuda", workloads=workloads), self._worker()

    def _take_and_run(self, kind, req, outputs=None, taken=None):
        assert kind == MEMCHECK and taken is not None and threading.current_thread() is not threading.main_thread()
        self.memcheck_runs += 1
        self.memcheck_running.set()
        run = EvalResult("test", "cuda", workloads=[WorkloadResult(w["name"], True, "") for w in req.heldout])
        outcome = WorkerOutcome(run.to_dict(), "", MEMCHECK_EXIT if self.out_of_bounds else 0, None,
                                memcheck_log=OOB_LOG if self.out_of_bounds else "")
        return req, outcome, taken[0]


@pytest.fixture
def tool(monkeypatch):
    found = MemcheckTool("/opt/cuda/bin/compute-sanitizer", "2025.3.1.0", frozenset())
    monkeypatch.setattr(evaluator_module, "find_memcheck", lambda: found)
    return found


def submit(ev) -> EvalResult:
    try:
        return ev.evaluate(ev.task.reference_path, "submit", seed=7)
    finally:
        ev.close()


def test_the_memory_checked_run_goes_beside_the_check_and_its_finding_counts(tmp_path, tool):
    ev = StagedEvaluator(tmp_path, out_of_bounds=True, overlap=True)
    result = submit(ev)
    assert ev.check_saw_memcheck and ev.memcheck_runs == 1, "the memory-checked run did not go beside the check"
    held = [w for w in result.workloads if w.heldout]
    assert len(held) == 2 and not held[0].correct and held[0].message.startswith("[out-of-bounds]")
    assert "Invalid __global__ write" in held[0].message and not result.correct
    assert all(w.correct for w in result.workloads if not w.heldout)
    assert result.sandbox["memcheck"].startswith("compute-sanitizer 2025.3.1.0 memcheck on the held-out shapes")
    assert all(w.closed for w in ev.workers)


def test_a_clean_memory_checked_run_leaves_a_correct_submission_correct(tmp_path, tool):
    result = submit(StagedEvaluator(tmp_path))
    assert result.correct and "memcheck on the held-out shapes" in result.sandbox["memcheck"]


def test_its_finding_does_not_count_when_the_check_fails_a_published_shape(tmp_path, tool):
    ev = StagedEvaluator(tmp_path, check_fails={"8192x8192"}, out_of_bounds=True, overlap=True)
    result = submit(ev)
    assert ev.check_saw_memcheck and ev.memcheck_runs == 1  # started on the solution run's verdicts
    wrong = [w for w in result.workloads if not w.correct]
    assert [w.name for w in wrong] == ["8192x8192"] and wrong[0].message == "wrong values"
    assert "memcheck" not in result.sandbox  # the check's verdict stands alone


def test_it_never_starts_when_the_solution_run_fails_a_published_shape(tmp_path, tool):
    ev = StagedEvaluator(tmp_path, solution_fails={"64x8192"}, out_of_bounds=True)
    result = submit(ev)
    assert ev.memcheck_runs == 0 and not result.correct
    assert "memcheck" not in result.sandbox


def test_without_the_tool_the_result_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator_module, "find_memcheck", lambda: None)
    ev = StagedEvaluator(tmp_path)
    result = submit(ev)
    assert result.correct and result.sandbox["memcheck"] == ABSENT
    assert ev.memcheck_runs == 0
