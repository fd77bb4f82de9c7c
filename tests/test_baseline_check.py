"""The baseline's measured times are checked against their roofline floor and this device's earlier
medians, and a suspect one is re-measured, saying so.

The timer is fake: stub workers (test_submit_memcheck's GPU submit path) report the baseline times a
test gives, run after run, so the rules are checked without a GPU or a clock.
"""

from __future__ import annotations

import json

import pytest

from d2k_env.evaluator.baseline_check import BAND, KEEP, BaselineTimes, cache_key, suspect
from d2k_env.verdict import format_result
from test_submit_memcheck import StagedEvaluator

CEILINGS = {"bandwidth_gbs": 3000.0, "copy_gbs": 3000.0, "read_gbs": 2900.0, "tflops": 700.0}
DEVICE, TORCH, TASK = "NVIDIA H100 80GB HBM3", "2.11.0+cu130", "fused_add_rmsnorm"
SOLUTION_MS = 0.2  # every workload's solution time, in every run
USUAL_MS = {"16384x4096": 0.5, "8192x8192": 0.5, "4096x7168": 0.25, "64x8192": 0.02}  # floors 0.18, 0.18, 0.08, 0.0014


class FakeTimer(StagedEvaluator):
    """The GPU submit path whose timed runs report, for each workload, the next of ``baselines[name]``
    (default: its usual time); ``timed_runs`` lists the workloads each timed run was asked for."""

    def __init__(self, tmp_path, baselines=None, **kwargs):
        super().__init__(tmp_path, **kwargs)
        self.baseline_times = BaselineTimes(tmp_path / "baseline-times.json")
        self.baselines = {name: list((baselines or {}).get(name, [])) for name in USUAL_MS}
        self.timed_runs = []

    def _run(self, req, outputs=None, copy=False):
        result, worker = super()._run(req, outputs, copy)
        if req.role == "replay" and req.mode in ("benchmark", "submit"):
            self.timed_runs.append(list(req.workloads))
            result.timed, result.ceilings, result.device_name = True, CEILINGS, DEVICE
            result.versions = {"torch": TORCH}
            for w in result.workloads:
                if w.name in req.workloads and w.correct:
                    queued = self.baselines[w.name]
                    w.baseline_ms = queued.pop(0) if queued else USUAL_MS[w.name]
                    w.solution_ms, w.speedup = SOLUTION_MS, w.baseline_ms / SOLUTION_MS
                    w.speedup_ci = (w.speedup * 0.99, w.speedup * 1.01)
        return result, worker


def evaluate(ev, mode="benchmark"):
    try:
        return ev.evaluate(ev.task.reference_path, mode, seed=7)
    finally:
        ev.close()


def key(workload):
    return cache_key(DEVICE, TORCH, TASK, workload)


def workload(result, name):
    return next(w for w in result.workloads if w.name == name)


def test_believed_times_fill_the_cache_and_are_not_re_measured(tmp_path):
    for _ in range(3):
        ev = FakeTimer(tmp_path)
        result = evaluate(ev)
        assert ev.timed_runs == [list(USUAL_MS)] and result.correct
        assert all(w.baseline_note is None for w in result.workloads)
    cache = BaselineTimes(tmp_path / "baseline-times.json")
    assert cache.earlier(key("8192x8192")) == [0.5, 0.5, 0.5]


def test_a_baseline_slowed_by_contention_is_re_measured_and_the_result_says_why(tmp_path):
    for _ in range(3):
        evaluate(FakeTimer(tmp_path))
    # The second evaluation of three at once: 8192x8192's baseline doubled (the solution's time held).
    ev = FakeTimer(tmp_path, baselines={"8192x8192": [1.0]})
    result = evaluate(ev, "submit")
    assert ev.timed_runs == [list(USUAL_MS), ["8192x8192"]], "the suspect workload alone was not re-measured"
    w = workload(result, "8192x8192")
    assert w.baseline_ms == 0.5 and w.speedup == pytest.approx(2.5), "the inflated speedup was kept"
    assert "re-measured because 1.0000 ms is 100% above this device's earlier median of 0.5000 ms" in w.baseline_note
    assert w.baseline_note.endswith("re-measured 0.5000 ms") and result.correct
    assert "baseline re-measured because" in format_result(result)
    assert [r["phase"] for r in result.lease][:3] == ["solution", "replay", "re-measure"] and result.lease[2]["exclusive"]
    assert BaselineTimes(tmp_path / "baseline-times.json").earlier(key("8192x8192")) == [0.5] * 4  # 1.0 kept out


def test_a_baseline_under_its_roofline_floor_is_re_measured_even_without_earlier_runs(tmp_path):
    ev = FakeTimer(tmp_path, baselines={"4096x7168": [0.01]})
    result = evaluate(ev)
    assert ev.timed_runs == [list(USUAL_MS), ["4096x7168"]]
    w = workload(result, "4096x7168")
    assert w.baseline_ms == 0.25 and "under its roofline floor (0.0783 ms)" in w.baseline_note


def test_a_cache_filled_under_load_gives_way_to_two_faster_runs_that_agree(tmp_path):
    for _ in range(3):
        evaluate(FakeTimer(tmp_path))
    ev = FakeTimer(tmp_path, baselines={"64x8192": [0.014, 0.0145]})  # both runs agree: the cache was slow
    w = workload(evaluate(ev), "64x8192")
    assert w.baseline_ms == 0.0145 and "agrees with the first run" in w.baseline_note
    assert BaselineTimes(tmp_path / "baseline-times.json").earlier(key("64x8192")) == [0.0145]


@pytest.mark.parametrize("times", [[1.0, 2.0], [1.0, 1.0]], ids=["disagreeing", "agreeing"])
def test_a_baseline_still_slow_after_the_re_measure_is_paid_against_the_earlier_median(tmp_path, times):
    """A solution could slow the baseline in both runs alike: a slower time never replaces the cache's."""
    for _ in range(3):
        evaluate(FakeTimer(tmp_path))
    ev = FakeTimer(tmp_path, baselines={"16384x4096": list(times)})
    w = workload(evaluate(ev), "16384x4096")
    assert w.baseline_ms == times[1] and "still off" in w.baseline_note
    assert w.speedup == pytest.approx(0.5 / SOLUTION_MS) and w.speedup_ci[1] == pytest.approx(0.5 / SOLUTION_MS * 1.01)
    assert BaselineTimes(tmp_path / "baseline-times.json").earlier(key("16384x4096")) == [0.5] * 3


def test_a_re_measured_run_that_fails_is_not_paid(tmp_path):
    for _ in range(3):
        evaluate(FakeTimer(tmp_path))
    ev = FakeTimer(tmp_path, baselines={"8192x8192": [1.0]}, solution_fails=set())
    run = ev._run

    def failing_second(req, outputs=None, copy=False):
        result, worker = run(req, outputs, copy)
        if req.workloads == ["8192x8192"] and req.role == "replay":
            result.workloads[0].correct, result.workloads[0].message = False, "wrong values"
        return result, worker
    ev._run = failing_second
    result = evaluate(ev)
    w = workload(result, "8192x8192")
    assert not w.correct and w.message.startswith("baseline re-measure failed: wrong values") and not result.correct


def test_a_worker_cannot_write_the_note_or_the_lease(tmp_path):
    from d2k_env.evaluator.protocol import EvalRequest, EvalResult, WorkloadResult
    from d2k_env.evaluator.sandbox import WorkerOutcome
    ev = FakeTimer(tmp_path)
    forged = EvalResult("benchmark", "cuda", workloads=[WorkloadResult("64x8192", True, "", baseline_note="fine")],
                        lease=[{"phase": "solution"}])
    req = EvalRequest(TASK, "", "", "benchmark", "cuda", ["64x8192"], False, 0)
    result = ev._result(req, WorkerOutcome(forged.to_dict(), "", 0, None))
    ev.close()
    assert result.lease == [] and result.workloads[0].baseline_note is None


def test_the_cache_keeps_the_newest_and_survives_a_damaged_file(tmp_path):
    cache = BaselineTimes(tmp_path / "times.json")
    for i in range(KEEP + 3):
        cache.record("k", float(i + 1))
    assert cache.earlier("k") == [float(i + 1) for i in range(3, KEEP + 3)]
    (tmp_path / "times.json").write_text("{not json")
    assert cache.earlier("k") == []
    cache.record("k", 2.0)
    assert json.loads((tmp_path / "times.json").read_text()) == {"k": [2.0]}


def test_suspect_names_the_floor_and_the_band():
    assert suspect(0.05, 0.1, []) and "roofline floor" in suspect(0.05, 0.1, [])
    assert suspect(0.095, 0.1, []) is None  # within the floor's slack
    assert suspect(1.0 + BAND - 1e-9, None, [1.0, 1.0]) is None
    assert "above" in suspect(1.0 + BAND + 1e-3, None, [1.0]) and "below" in suspect(0.7, None, [1.0])


def test_an_unwritable_cache_never_stops_an_evaluation(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = BaselineTimes(blocker / "times.json")  # its directory cannot be made: a file is in the way
    with pytest.warns(RuntimeWarning, match="could not be written"):
        cache.record("k", 1.0)
    assert cache.earlier("k") == []
