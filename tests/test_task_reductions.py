"""SumTolerance (d2k_env.tasks.reductions): long fp32 sums checked against the largest expected
magnitude, which admits any fp32 summation order and refuses a bf16 rounding inside the sum."""

import pytest
import torch

from d2k_env.tasks import SumTolerance

CHECK = SumTolerance(rtol=1e-4, floor=2.0 ** -14, why="a test sum")


def column_sums():
    """Column sums of M signed products whose rows span orders of magnitude, as weight gradients are,
    in float64 (the expected value), fp32 in row order, and with each product rounded to bf16."""
    gen = torch.Generator().manual_seed(0)
    terms = torch.randn(4096, 64, generator=gen, dtype=torch.float64) * torch.exp(
        torch.randn(4096, 1, generator=gen, dtype=torch.float64) * 1.5)
    expected = terms.sum(0).float()
    in_order = torch.zeros(64)
    for row in terms.float():  # sequential: the worst order an atomic add gives
        in_order += row
    rounded = terms.float().bfloat16().float().sum(0)
    return expected, in_order, rounded


def test_any_fp32_order_passes_and_a_bf16_rounding_inside_fails():
    expected, in_order, rounded = column_sums()
    assert CHECK.verdict("dw", in_order, expected).ok
    verdict = CHECK.verdict("dw", rounded, expected)
    assert not verdict.ok and verdict.message.startswith("dw: ") and "max|expected|" in verdict.message


def test_an_output_scaled_by_one_part_in_a_thousand_fails():
    expected, _, _ = column_sums()
    assert not CHECK.verdict("dw", expected * (1 + 1e-3), expected).ok


def test_nan_and_misplaced_infinities_fail():
    expected, in_order, _ = column_sums()
    with_nan = in_order.clone()
    with_nan[3] = float("nan")
    assert not CHECK.verdict("dw", with_nan, expected).ok
    with_inf = in_order.clone()
    with_inf[5] = float("inf")
    assert not CHECK.verdict("dw", with_inf, expected).ok


def test_bounds_loose_enough_to_pass_a_scaled_output_are_refused():
    with pytest.raises(ValueError, match="scaled"):
        SumTolerance(rtol=1e-4, floor=1e-2, why="too loose")
    with pytest.raises(ValueError, match="scaled"):
        SumTolerance(rtol=2e-3, floor=1e-5, why="too loose")
    with pytest.raises(ValueError, match="why"):
        SumTolerance(rtol=1e-4, floor=1e-5, why=" ")


def test_only_wide_float_outputs_and_the_phrase_names_the_bound():
    assert CHECK.problem(torch.float32) is None
    assert "OneStep" in CHECK.problem(torch.bfloat16)
    text = CHECK.describe(torch.float32)
    assert "largest |expected|" in text and "a test sum" in text
