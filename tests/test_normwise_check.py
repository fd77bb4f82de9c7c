"""NormwiseError (d2k_env.tasks.normwise): rows of long bf16-operand products are checked against
their norm, so operand rounding passes and a computation wrong in kind does not."""

import pytest
import torch

from d2k_env.tasks import Output, PerOutput
from d2k_env.tasks.normwise import NormwiseError

CHECK = NormwiseError(0.05, floor=0.02)


def products(gen, rows=64, n=192, width=32):
    a, b = torch.randn(rows, n, generator=gen), torch.randn(n, width, generator=gen)
    return a, b, a.double() @ b.double()


def test_bf16_operands_with_fp32_accumulation_pass_and_fp8_operands_fail():
    a, b, exact = products(torch.Generator().manual_seed(0))
    bf16 = a.bfloat16().float() @ b.bfloat16().float()
    fp8 = a.to(torch.float8_e4m3fn).float() @ b.to(torch.float8_e4m3fn).float()
    assert CHECK.verdict("o", bf16.bfloat16(), exact.float()).ok
    verdict = CHECK.verdict("o", fp8.bfloat16(), exact.float())
    assert not verdict.ok and verdict.message.startswith("o: ") and "rows off by more than 0.05" in verdict.message


def test_a_dropped_term_fails_and_a_cancelling_row_is_judged_by_the_floor():
    a, b, exact = products(torch.Generator().manual_seed(1))
    dropped = a[:, 12:].double() @ b[12:].double()  # a block of terms left out (a masked-off tile)
    assert not CHECK.verdict("o", dropped.float(), exact.float()).ok
    ref = exact.float().clone()
    ref[0] = 1e-6  # a row whose terms cancelled to almost nothing: its rounding error is the terms'
    out = ref.clone()
    # An error of half the floor's allowance (0.05 * 0.02 of the rows' RMS norm), spread over the row.
    out[0] += 0.0005 * ref.norm(dim=-1).pow(2).mean().sqrt() / ref.shape[-1] ** 0.5
    assert CHECK.verdict("o", out, ref).ok
    assert not NormwiseError(0.05, floor=0.0).verdict("o", out, ref).ok


@pytest.mark.parametrize("bad, words", [(float("nan"), "contains NaN"), (float("inf"), "infinities differ")])
def test_nan_and_misplaced_infinities_fail(bad, words):
    ref = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
    out = ref.clone()
    out[1, 2] = bad
    verdict = CHECK.verdict("y", out, ref)
    assert not verdict.ok and words in verdict.message


def test_it_describes_itself_and_refuses_integer_outputs():
    checker = PerOutput({"o": CHECK})
    assert "within 0.05 times (the row's norm + 0.02 times" in checker.describe([Output("o", torch.bfloat16)])
    assert "not int32" in checker.problem([Output("o", torch.int32)])
