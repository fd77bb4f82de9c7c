"""A check for outputs of long products whose operands may be rounded to bf16 on the way.

Tensor-core kernels (attention, chunked linear attention) feed fp32 intermediates to matmuls as
bf16 operands and accumulate in fp32, as the source systems' kernels do. Each product then carries
the operands' rounding (2^-9 relative each); summed over a row of n terms of mixed signs, the error
is about 2^-8 times the norm of the terms, not of the result. Where terms cancel, an element can be
far off in relative terms while its row is right, so an elementwise bound either refuses honest
kernels or is too loose to matter. :class:`NormwiseError` bounds the error of each row (the last
dimension, a head's vector) by a fraction of that row's norm plus a floor, a fraction of the rows'
root-mean-square norm, for rows whose terms cancel to about nothing (the typical row's norm is what
their terms are made of; the largest row would let one outlier loosen every other).

A computation that is wrong in kind (a dropped mask, a skipped decay, a state carried in bf16 from
one chunk to the next so that its rounding compounds) moves whole rows by far more than the
rounding of operands; the task states the bound and why in its description.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import OutputCheck, dtype_name


@dataclass(frozen=True)
class NormwiseError(OutputCheck):
    """Every row (last dimension) within ``max_rel`` of its expected norm, in the 2-norm:
    ``|out_row - ref_row| <= max_rel * (|ref_row| + floor * rms_rows |ref_row|)``. NaN never passes
    and infinities must be exactly where the expected ones are."""

    max_rel: float
    floor: float = 0.02
    why: str = "bf16 matmul operands with fp32 accumulation"

    def verdict(self, name, out, ref):
        o, r = out.double(), ref.double()
        if torch.isnan(o).any():
            return CheckResult(False, f"{name}: contains NaN")
        finite = torch.isfinite(r)
        if not torch.equal(o[~finite], r[~finite]) or not torch.isfinite(o[finite]).all():
            return CheckResult(False, f"{name}: infinities differ from the expected output")
        o, r = o.where(finite, 0.0), r.where(finite, 0.0)
        rows = r.reshape(-1, r.shape[-1]) if r.dim() else r.reshape(1, 1)
        err = (o.reshape(rows.shape) - rows).norm(dim=-1)
        norm = rows.norm(dim=-1)
        if not err.numel():
            return CheckResult(True, "")
        scale = norm + self.floor * norm.pow(2).mean().sqrt()
        bound = self.max_rel * scale
        rel = (err / scale.clamp(min=1e-30)).max().item()
        bad = err > bound
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            index = list(torch.unravel_index(torch.tensor(i), r.shape[:-1])) if r.dim() > 1 else []
            return CheckResult(False, f"{name}: {int(bad.sum())} of {len(err)} rows off by more than {self.max_rel:g} "
                                      f"of their norm; first at {[int(x) for x in index]}: error "
                                      f"{err[i].item():.3g}, row norm {norm[i].item():.3g}",
                               (o.reshape(rows.shape) - rows).abs().max().item(), rel)
        return CheckResult(True, "", (o.reshape(rows.shape) - rows).abs().max().item(), rel)

    def describe(self, dtype):
        return (f"the 2-norm error of every row (last dimension) within {self.max_rel:g} times (the row's norm + "
                f"{self.floor:g} times the rows' root-mean-square norm) ({self.why})")

    def problem(self, dtype):
        if not dtype.is_floating_point:
            return f"NormwiseError is for float outputs, not {dtype_name(dtype)}"
        return None
