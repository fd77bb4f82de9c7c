"""MatrixNormError (d2k_env.tasks.matrix_norm): each matrix's Frobenius-norm error bounded relative to its
own norm, so matrices of very different scales are each held to the bound, and a zero one to zero."""

import pytest
import torch

from d2k_env.tasks import MatrixNormError

CHECK = MatrixNormError(0.06, why="a test bound")


def stack():
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(3, 16, 24, generator=gen) * torch.tensor([1e-3, 1.0, 1e3]).view(3, 1, 1)
    noise = torch.randn(3, 16, 24, generator=gen)
    return ref, noise


def test_each_matrix_within_its_own_bound_passes():
    ref, noise = stack()
    # 3% of each matrix's own norm: passes, whatever the scales.
    out = ref + 0.03 * noise / noise.flatten(1).norm(dim=1).view(3, 1, 1) * ref.flatten(1).norm(dim=1).view(3, 1, 1)
    verdict = CHECK.verdict("x", out.bfloat16(), ref.bfloat16())
    assert verdict.ok and 0.02 < verdict.max_rel_err < 0.04


def test_a_small_matrix_off_by_more_fails_even_when_the_large_ones_hide_it():
    ref, noise = stack()
    out = ref.clone()
    out[0] += 0.2 * noise[0] * ref[0].norm() / noise[0].norm()  # 20% off on the 1e-3 matrix only
    verdict = CHECK.verdict("x", out, ref)
    assert not verdict.ok and "matrix 0" in verdict.message and verdict.message.startswith("x: 1 of 3")


def test_a_zero_matrix_must_stay_zero_and_nan_fails():
    ref, _ = stack()
    ref[1] = 0
    out = ref.clone()
    assert CHECK.verdict("x", out, ref).ok
    out[1, 0, 0] = 1e-6
    assert not CHECK.verdict("x", out, ref).ok
    out = ref.clone()
    out[2, 3, 4] = float("nan")
    assert "NaN" in CHECK.verdict("x", out, ref).message


def test_bounds_that_check_nothing_are_refused():
    with pytest.raises(ValueError, match="checks nothing"):
        MatrixNormError(0.5, why="too wide")
    with pytest.raises(ValueError, match="why"):
        MatrixNormError(0.05, why="")
    assert "relative Frobenius-norm error of 0.06" in CHECK.describe(torch.bfloat16)
    assert CHECK.problem(torch.int32) and CHECK.problem(torch.bfloat16) is None


def test_columns_never_written_fail_the_vector_bound_though_the_matrix_norm_hides_them():
    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(2, 8, 4000, generator=gen)
    out = ref + 0.02 * torch.randn(2, 8, 4000, generator=gen)
    out[1, :, -8:] = 0  # a tail the kernel's block did not reach: 0.2% of the matrix
    assert CHECK.verdict("x", out, ref).ok  # the norm alone misses it
    with_vectors = MatrixNormError(0.06, why="a test bound", vector_rel=0.5)
    verdict = with_vectors.verdict("x", out, ref)
    assert not verdict.ok and "8 columns" in verdict.message and "matrix 1" in verdict.message
    assert with_vectors.verdict("x", ref + 0.02 * torch.randn(2, 8, 4000, generator=gen), ref).ok
    assert "rows and columns within 0.5" in with_vectors.describe(torch.bfloat16)
