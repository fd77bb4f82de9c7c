"""The inverse checker (d2k_env.tasks.inverse_residual): it judges an inverse by its residual against
the matrix, accepts fp32 inverses of either summation order, and fails rounded ones, wrong structure
and non-finite values."""

import pytest
import torch

from d2k_env.tasks import Output
from d2k_env.tasks.inverse_residual import InverseResidual

N = 16


def matrices():
    """Unit lower-triangular matrices with entries up to 1, and their float64 inverses."""
    gen = torch.Generator().manual_seed(0)
    A = (torch.rand(8, N, N, generator=gen, dtype=torch.float64) * 2 - 1).tril(-1)
    M = torch.eye(N, dtype=torch.float64) + A
    return M, torch.linalg.inv(M)


M, INV = matrices()
CHECK = InverseResidual(lambda inputs, out: (inputs[0], out.double(), torch.ones(N, N, dtype=torch.bool).triu(1)
                                             .expand(out.shape[0], N, N)), "X", 2.0 ** -16)


def verdict(X):
    return CHECK.verdict({"X": X}, {"X": X}, (M,))


def round_to(x, bits):
    mantissa, exponent = torch.frexp(x)
    return torch.ldexp(torch.round(mantissa * 2 ** bits) / 2 ** bits, exponent)


def test_fp32_inverses_pass_whatever_the_route():
    assert verdict(INV.float()).ok
    substituted = torch.linalg.solve_triangular(M.float(), torch.eye(N).expand(8, N, N), upper=False,
                                                unitriangular=True)
    assert verdict(substituted).ok


@pytest.mark.parametrize("bits, name", [(11, "tf32"), (8, "bf16")])
def test_rounded_inverses_fail(bits, name):
    result = verdict(round_to(INV, bits).float())
    assert not result.ok and "over" in result.message, name


def test_structure_and_finiteness():
    X = INV.float().clone()
    X[3, 2, 5] = 1e-30                     # above the diagonal: must be exactly 0
    assert "exactly 0" in verdict(X).message
    X = INV.float().clone()
    X[0, 4, 1] = float("nan")
    assert "NaN" in verdict(X).message
    X = INV.float().clone()
    X[1, 7, 7] = 1.001                     # a diagonal entry off: the residual shows it
    assert "over" in verdict(X).message


def test_problem_names_a_missing_or_integer_output():
    assert CHECK.problem([Output("X", torch.float32)]) is None
    assert "no output named" in CHECK.problem([Output("Y", torch.float32)])
    assert "float output" in CHECK.problem([Output("X", torch.int32)])


def test_one_variant_of_the_matrix_must_fit_every_inverse():
    other = M.clone()
    other[:, 5, 2] += 1e-2                     # another rounding of one entry of every matrix
    inverse_of_other = torch.linalg.inv(other).float()
    either = InverseResidual(lambda inputs, out: ((inputs[0], other), out.double(),
                                                  torch.ones(N, N, dtype=torch.bool).triu(1).expand(out.shape[0], N, N)),
                             "X", 2.0 ** -16)
    assert not verdict(inverse_of_other).ok
    assert either.verdict({"X": inverse_of_other}, {}, (M,)).ok
    assert either.verdict({"X": INV.float()}, {}, (M,)).ok
    mixed = torch.cat([INV.float()[:4], inverse_of_other[4:]])   # half against each: no single variant fits
    assert not either.verdict({"X": mixed}, {}, (M,)).ok
