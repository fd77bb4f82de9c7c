"""The top-k/top-p mask checker (d2k_env.tasks.sampling_masks): it accepts every valid threshold,
ties kept together and mass decisions within the tolerance either way, and fails the usual faults."""

import pytest
import torch

from d2k_env.tasks import Output
from d2k_env.tasks.sampling_masks import TopKTopPMask

INF = float("inf")
CHECK = TopKTopPMask(mass_tol=1e-4)


def verdict(masked, logits, k, p):
    inputs = (torch.tensor(logits), torch.tensor(k, dtype=torch.int32), torch.tensor(p))
    out = torch.tensor(masked)
    return CHECK.verdict({"masked": out}, {"masked": out}, inputs)


# One row: logits 3, 2, 2, 1, 0 (a tie at 2), masses over all five.
ROW = [3.0, 2.0, 2.0, 1.0, 0.0]


@pytest.mark.parametrize("masked, k, p, ok, words", [
    ([3.0, 2.0, 2.0, -INF, -INF], 2, 1.0, True, ""),              # the tie with the 2nd kept
    ([3.0, 2.0, -INF, -INF, -INF], 2, 1.0, False, "tie group"),     # exactly k, tie split by index
    ([3.0, 2.0, 2.0, 1.0, -INF], 2, 1.0, False, "below the k-th"),
    (ROW, 5, 1.0, True, ""),                                        # k = V, p = 1: everything
    ([3.0, 2.0, 2.0, -INF, -INF], 5, 0.7, True, ""),                # mass of {3}: 0.52 < 0.7 <= 0.90
    ([3.0, -INF, -INF, -INF, -INF], 5, 0.7, False, "too few"),
    ([3.0, 2.0, 2.0, 1.0, -INF], 5, 0.7, False, "too many"),
    ([3.0, 2.0, 2.0, -INF, -INF], 5, 0.5, False, "too many"),       # {3} alone already holds 0.52
    ([3.0, 2.0, 2.0, 1.0000001, -INF], 5, 0.99, False, "differs from its logit"),
    ([3.0, 2.0, 2.0, float("nan"), -INF], 5, 0.99, False, "NaN"),
    ([-INF] * 5, 5, 0.99, False, "every logit masked"),
])
def test_one_row(masked, k, p, ok, words):
    result = verdict([masked], [ROW], [k], [p])
    assert result.ok is ok, result.message
    assert words in result.message


def test_top_p_is_over_the_top_k_survivors():
    # k = 2 keeps {3, 2, 2}: 3 holds 0.58 of their mass; over the whole row 0.52.
    assert verdict([[3.0, 2.0, 2.0, -INF, -INF]], [ROW], [2], [0.6]).ok
    assert "too few" in verdict([[3.0, -INF, -INF, -INF, -INF]], [ROW], [2], [0.6]).message


def test_a_mass_decision_within_the_tolerance_goes_either_way():
    # Masses of the sorted logits; p placed 1e-5 above the mass of the top one: keeping it alone or
    # with the next are both answers a sum in another order can give.
    q = torch.softmax(torch.tensor(ROW, dtype=torch.float64), 0)
    p = float(q[0]) + 1e-5
    assert verdict([[3.0, -INF, -INF, -INF, -INF]], [ROW], [5], [p]).ok
    assert verdict([[3.0, 2.0, 2.0, -INF, -INF]], [ROW], [5], [p]).ok


def test_fewer_finite_logits_than_k_keep_them_all():
    row = [1.0, -INF, 0.5, -INF]
    assert verdict([row], [row], [3], [1.0]).ok
    assert not verdict([[1.0, -INF, -INF, -INF]], [row], [3], [1.0]).ok


def test_rows_are_checked_independently_and_named():
    result = verdict([ROW, [3.0, -INF, -INF, -INF, -INF]], [ROW, ROW], [5, 2], [1.0, 1.0])
    assert not result.ok and "row 1" in result.message


def test_problem_names_a_missing_or_integer_output():
    assert CHECK.problem([Output("masked", torch.float32)]) is None
    assert "no output named" in CHECK.problem([Output("y", torch.float32)])
    assert "float output" in CHECK.problem([Output("masked", torch.int32)])
