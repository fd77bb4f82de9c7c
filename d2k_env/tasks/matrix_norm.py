"""A check for outputs whose elements are not individually meaningful to a rounding step: iterated
bf16 matrix computations (Newton-Schulz orthogonalisation, say), where every honest order of the
GEMMs and roundings moves single elements by percents but the matrix as a whole by a bounded
relative amount, and a wrong algorithm (an iteration fewer, fp8 inside) moves it several times more.

:class:`MatrixNormError` bounds, for each matrix of the output (its last two dimensions), the Frobenius
norm of the error by ``max_rel`` times the Frobenius norm of the expected matrix. A zero expected
matrix must then come out exactly zero. A fault confined to a few rows or columns (a block never
written, a tail column missed) hardly moves a large matrix's norm, so with ``vector_rel`` every row
and every column of every matrix is also held to that (looser) fraction of its own norm.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import OutputCheck


@dataclass(frozen=True)
class MatrixNormError(OutputCheck):
    """Per matrix (the last two dimensions; a 1-d output is one vector): ||out - expected||_F <=
    ``max_rel`` * ||expected||_F. NaN and infinities never pass. ``why`` states what the bound was
    measured against (the honest orders it admits, the wrong ones it refuses)."""

    max_rel: float
    why: str
    vector_rel: float | None = None

    def __post_init__(self):
        for name, bound in (("max_rel", self.max_rel), ("vector_rel", self.vector_rel)):
            if bound is not None and not 0 < bound < 1:
                raise ValueError(f"MatrixNormError: {name} in (0, 1) (got {bound:g}): a bound that wide checks "
                                 f"nothing")
        if not 0 < self.max_rel < 0.5:
            raise ValueError(f"MatrixNormError: max_rel in (0, 0.5) (got {self.max_rel:g}): a bound that wide "
                             f"checks nothing")
        if not self.why.strip():
            raise ValueError("MatrixNormError: why must state what the bound was measured against")

    def verdict(self, name, out, ref):
        o, r = out.double(), ref.double()
        if not torch.isfinite(o).all():
            return CheckResult(False, f"{name}: contains NaN or infinities")
        if o.dim() < 2:
            o, r = o.reshape(1, 1, -1), r.reshape(1, 1, -1)
        o, r = o.flatten(0, -3), r.flatten(0, -3)
        err = (o - r).flatten(1).norm(dim=1)
        size = r.flatten(1).norm(dim=1)
        bad = err > self.max_rel * size
        rel = (err / size.clamp(min=1e-300)).max().item()
        max_abs = (o - r).abs().max().item() if o.numel() else 0.0
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            return CheckResult(False, f"{name}: {int(bad.sum())} of {len(bad)} matrices off by more than "
                                      f"{self.max_rel:g} of their norm; first, matrix {i}: relative error "
                                      f"{err[i].item() / max(size[i].item(), 1e-300):.3g}", max_abs, rel)
        if self.vector_rel is not None:
            for axis, what in ((-1, "row"), (-2, "column")):
                bad = (o - r).norm(dim=axis) > self.vector_rel * r.norm(dim=axis)
                if bad.any():
                    i, j = (int(v) for v in torch.nonzero(bad)[0])
                    return CheckResult(False, f"{name}: {int(bad.sum())} {what}s off by more than {self.vector_rel:g} "
                                              f"of their norm; first, {what} {j} of matrix {i}", max_abs, rel)
        return CheckResult(True, "", max_abs, rel)

    def describe(self, dtype):
        rows = (f", and each of its rows and columns within {self.vector_rel:g} of its own norm"
                if self.vector_rel is not None else "")
        return (f"each matrix within a relative Frobenius-norm error of {self.max_rel:g} of the expected one{rows} "
                f"({self.why})")

    def problem(self, dtype):
        return None if dtype.is_floating_point else f"MatrixNormError is for float outputs, not {dtype}"
