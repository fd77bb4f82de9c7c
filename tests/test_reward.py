"""Reward arithmetic on synthetic evaluation results."""

import math

import pytest

from d2k_env.evaluator.protocol import EvalResult, WorkloadResult
from d2k_env.reward import SPEEDUP_CAP, submission_reward


def result(speedups, correct=True, timed=True):
    workloads = [WorkloadResult(f"w{i}", correct, "", speedup=s if timed else None) for i, s in enumerate(speedups)]
    return EvalResult("submit", "cuda" if timed else "interpreter", workloads, timed=timed)


def test_speedup_is_the_geometric_mean():
    assert submission_reward("speedup", result([2.0, 8.0])) == pytest.approx(4.0)
    assert submission_reward("log_speedup", result([2.0, 8.0])) == pytest.approx(math.log(5.0))
    assert submission_reward("binary", result([2.0, 8.0])) == 1.0


def test_one_incorrect_workload_zeroes_every_kind():
    r = result([2.0, 8.0])
    r.workloads[1].correct = False
    assert all(submission_reward(k, r) == 0.0 for k in ("speedup", "log_speedup", "binary"))
    errored = result([3.0])
    errored.error = "[policy] ..."
    assert submission_reward("speedup", errored) == 0.0


def test_each_workload_is_capped_so_none_dominates():
    assert submission_reward("speedup", result([1e6, 1.0])) == pytest.approx(math.sqrt(SPEEDUP_CAP))


def test_untimed_correct_submission_earns_one():
    assert submission_reward("speedup", result([None, None], timed=False)) == 1.0
    assert submission_reward("log_speedup", result([None], timed=False)) == 1.0
