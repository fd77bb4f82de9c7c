"""A GPU submission's memory-checked run, as the evaluator orchestrates it, on the CPU: the workers
are stubs that say what each run found, so the order and the rules are checked without a GPU.

The rules: the memory-checked run (the held-out shapes under compute-sanitizer) starts once the
solution run's own verdicts pass the published shapes, and runs beside the check process; its
finding counts only when the check also passes the published shapes; without the tool the result
says so. Where the machine has the tool and its run does not complete (cannot start, cannot attach,
crashes, runs out of time), the submission is not paid and the verdict says why: the check fails
closed. The real run on the H200 is tests/test_security.py's ``gpu-memcheck`` case.
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
from d2k_env.verdict import format_result

WAIT_S = 10.0  # how long the stubbed check waits for the memory-checked run to be under way
NEVER_ATTACHED_LOG = ("========= Error: Target application terminated before first instrumented API call\n"
                      "========= ERROR SUMMARY: 0 errors\n")
INCOMPLETE = ("start", "attach", "crash", "timeout", "raise")
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

    def __init__(self, tmp_path, solution_fails=(), check_fails=(), out_of_bounds=False, overlap=False,
                 incomplete=None):
        super().__init__(load_task("fused_add_rmsnorm"), "interpreter", lease_dir=tmp_path)
        self.tmp_path, self.solution_fails, self.check_fails = tmp_path, set(solution_fails), set(check_fails)
        self.out_of_bounds, self.overlap, self.workers = out_of_bounds, overlap, []
        self.memcheck_running, self.check_saw_memcheck, self.memcheck_runs = threading.Event(), None, 0
        self.incomplete = incomplete  # how the memory-checked run fails to complete: one of INCOMPLETE
        self.pool.take = self._take

    def _worker(self):
        self.workers.append(StubWorker(self.tmp_path))
        return self.workers[-1]

    def _take(self, kind):
        assert kind == MEMCHECK
        if self.incomplete == "start":
            raise RuntimeError("the worker exited before it was ready (ModuleNotFoundError: d2k_env)")
        return self._worker(), True

    def _run(self, req, outputs=None, copy=False):
        names = req.workloads + [w["name"] for w in req.heldout]
        failing = self.solution_fails if req.role in ("solution", "replay") else self.check_fails
        if req.role == "check":
            # Sequential code starts the memory-checked run only after this returns: the wait runs out.
            self.check_saw_memcheck = self.memcheck_running.wait(WAIT_S if self.overlap else 0)
        workloads = [WorkloadResult(n, n not in failing, "wrong values" if n in failing else "") for n in names]
        return EvalResult(req.mode, "cuda", workloads=workloads), self._worker()

    def _take_and_run(self, kind, req, outputs=None, taken=None, copy=False):
        assert kind == MEMCHECK and taken is not None and threading.current_thread() is not threading.main_thread()
        self.memcheck_runs += 1
        self.memcheck_running.set()
        run = EvalResult("test", "cuda", workloads=[WorkloadResult(w["name"], True, "") for w in req.heldout])
        outcome = WorkerOutcome(run.to_dict(), "", MEMCHECK_EXIT if self.out_of_bounds else 0, None,
                                memcheck_log=OOB_LOG if self.out_of_bounds else "")
        if self.incomplete == "attach":
            outcome = WorkerOutcome(None, "", 1, None, memcheck_log=NEVER_ATTACHED_LOG)
        elif self.incomplete == "crash":
            outcome = WorkerOutcome(None, "", -11, None)
        elif self.incomplete == "timeout":
            outcome = WorkerOutcome(None, "", -9, "the phase 'check' ran past its limit of 600 s")
        elif self.incomplete == "raise":
            raise OSError("the sandbox could not be set up")
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
    assert len(held) >= 2 and not held[0].correct and held[0].message.startswith("[out-of-bounds]")
    assert "Invalid __global__ write" in held[0].message and not result.correct
    assert all(w.correct for w in result.workloads if not w.heldout)
    assert result.sandbox["memcheck"].startswith("ran, found a problem: compute-sanitizer 2025.3.1.0 memcheck on "
                                                 "the held-out shapes")
    assert all(w.closed for w in ev.workers)


def test_a_clean_memory_checked_run_leaves_a_correct_submission_correct(tmp_path, tool):
    result = submit(StagedEvaluator(tmp_path))
    assert result.correct and result.sandbox["memcheck"].startswith("ran, clean: compute-sanitizer")


def test_its_finding_does_not_count_when_the_check_fails_a_published_shape(tmp_path, tool):
    ev = StagedEvaluator(tmp_path, check_fails={"8192x8192"}, out_of_bounds=True, overlap=True)
    result = submit(ev)
    assert ev.check_saw_memcheck and ev.memcheck_runs == 1  # started on the solution run's verdicts
    wrong = [w for w in result.workloads if not w.correct]
    assert [w.name for w in wrong] == ["8192x8192"] and wrong[0].message == "wrong values"
    assert result.sandbox["memcheck"].startswith("not run: the submission already failed")  # the check's verdict


def test_it_never_starts_when_the_solution_run_fails_a_published_shape(tmp_path, tool):
    ev = StagedEvaluator(tmp_path, solution_fails={"64x8192"}, out_of_bounds=True)
    result = submit(ev)
    assert ev.memcheck_runs == 0 and not result.correct
    assert result.sandbox["memcheck"].startswith("not run: the submission already failed")


def test_without_the_tool_the_result_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluator_module, "find_memcheck", lambda: None)
    ev = StagedEvaluator(tmp_path)
    result = submit(ev)
    assert result.correct and result.sandbox["memcheck"] == ABSENT
    assert ev.memcheck_runs == 0


@pytest.mark.parametrize("how", INCOMPLETE)
def test_a_memory_checked_run_that_does_not_complete_is_not_paid(tmp_path, tool, how):
    """Fails closed: the machine has the tool, so a submission it could not check is refused, saying so."""
    ev = StagedEvaluator(tmp_path, incomplete=how)
    result = submit(ev)
    assert not result.correct, f"paid although the memory-checked run did not complete ({how})"
    wrong = [w for w in result.workloads if not w.correct]
    assert len(wrong) == 1 and wrong[0].heldout and wrong[0].message.startswith(("memory check incomplete:",
                                                                                  "the held-out shapes did not run"))
    assert result.sandbox["memcheck"].startswith("did not complete")
    assert all(w.correct for w in result.workloads if not w.heldout)
    assert all(w.closed for w in ev.workers)


def test_every_gpu_verdict_says_whether_the_memory_check_ran(tmp_path, tool):
    result = StagedEvaluator(tmp_path).evaluate(load_task("fused_add_rmsnorm").reference_path, "benchmark", seed=7)
    assert result.sandbox["memcheck"].startswith("not run: only a submission's held-out shapes")
    assert "memory check: not run" in format_result(result)
    result = submit(StagedEvaluator(tmp_path))
    assert "memory check: ran, clean" in format_result(result)
    result = submit(StagedEvaluator(tmp_path, incomplete="attach"))
    assert "memory check: did not complete" in format_result(result)


def test_its_phases_hold_the_gpu_lease_shared_and_the_timed_replay_exclusively(tmp_path, tool):
    result = submit(StagedEvaluator(tmp_path))
    phases = {r["phase"]: r for r in result.lease}
    assert set(phases) == {"solution", "replay", "check", "memcheck"}
    assert phases["replay"]["exclusive"] and not any(phases[p]["exclusive"] for p in ("solution", "check", "memcheck"))
    assert all(r["gpu"] == phases["replay"]["gpu"] and r["waited_s"] >= 0 for r in result.lease)
