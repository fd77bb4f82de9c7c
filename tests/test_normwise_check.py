"""NormwiseError (d2k_env.tasks.normwise): rows of long bf16-operand products are checked against
their norm, so operand rounding passes and a computation wrong in kind does not."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from d2k_env.tasks import Output, PerOutput
from d2k_env.tasks import normwise
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


def cases(gen):
    """Outputs against expected ones of every kind the check tells apart, in several layouts."""
    ref = torch.randn(6, 5, 40, generator=gen)
    noisy = ref + 0.001 * torch.randn(ref.shape, generator=gen)
    one_bad = noisy.clone()
    one_bad[4, 3] *= 1.5  # a row past its bound, in a late chunk
    nan, inf, ref_inf = noisy.clone(), noisy.clone(), ref.clone()
    nan[5, 4, 39], inf[0, 1, 2], ref_inf[2, 2, 2] = float("nan"), float("inf"), float("-inf")
    matched = noisy.clone()
    matched[2, 2, 2] = float("-inf")
    scalar = torch.tensor(2.0)
    return [(noisy, ref), (one_bad, ref), (nan, ref), (inf, ref), (matched, ref_inf), (noisy, ref_inf),
            (one_bad[0, 0], ref[0, 0]), (scalar * 1.01, scalar), (scalar * 1.1, scalar),
            (one_bad.bfloat16(), ref), (torch.empty(0, 7), torch.empty(0, 7))]


def test_rows_judged_in_chunks_give_the_verdicts_of_one_chunk(monkeypatch):
    whole = [CHECK.verdict("o", out, ref) for out, ref in cases(torch.Generator().manual_seed(3))]
    assert [v.ok for v in whole].count(False) == 6
    monkeypatch.setattr(normwise, "CHUNK_ELEMENTS", 80)  # two rows of 40 a chunk
    chunked = [CHECK.verdict("o", out, ref) for out, ref in cases(torch.Generator().manual_seed(3))]
    for a, b in zip(whole, chunked):
        assert (a.ok, a.message) == (b.ok, b.message)
        assert a.max_abs_err == pytest.approx(b.max_abs_err) and a.max_rel_err == pytest.approx(b.max_rel_err)
    assert "first at [4, 3]" in chunked[1].message


class Allocations(TorchDispatchMode):
    """The bytes of every new storage an operation returns (views of existing ones are not counted)."""

    def __init__(self, *known):
        super().__init__()
        self.known = {t.untyped_storage().data_ptr() for t in known}
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in result if isinstance(result, (tuple, list)) else [result]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.known:
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return result


def test_no_allocation_is_larger_than_a_chunk_in_double(monkeypatch):
    # A double copy or a boolean mask of a whole large output ran the GPU out of memory; each
    # temporary must be bounded by a chunk of rows, not by the output.
    monkeypatch.setattr(normwise, "CHUNK_ELEMENTS", 4096)
    gen = torch.Generator().manual_seed(4)
    ref = torch.randn(512, 1024, generator=gen)
    out = ref + 0.001 * torch.randn(ref.shape, generator=gen)
    with Allocations(out, ref) as seen:
        assert CHECK.verdict("o", out, ref).ok
    assert 0 < seen.largest <= 8 * 4096
