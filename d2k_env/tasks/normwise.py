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

# Elements per chunk of rows the check upcasts at once (32 MiB in double); a row longer than this is
# a chunk of its own.
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class NormwiseError(OutputCheck):
    """Every row (last dimension) within ``max_rel`` of its expected norm, in the 2-norm:
    ``|out_row - ref_row| <= max_rel * (|ref_row| + floor * rms_rows |ref_row|)``. NaN never passes
    and infinities must be exactly where the expected ones are."""

    max_rel: float
    floor: float = 0.02
    why: str = "bf16 matmul operands with fp32 accumulation"

    def verdict(self, name, out, ref):
        # Rows go through in chunks of about CHUNK_ELEMENTS, each upcast to double on its own: the
        # outputs checked here reach gigabytes (an fp32 grad_W of 128K x 8K is 4 GiB), where a double
        # copy of the whole tensor and boolean masks of it ran the device out of memory. Each chunk
        # leaves only its rows' error and norm (one number each per row), judged once all are known,
        # as the floor needs every row's norm.
        width = out.shape[-1] if out.dim() else 1
        o_rows, r_rows = out.reshape(-1, width), ref.reshape(-1, width)
        step = max(1, CHUNK_ELEMENTS // max(width, 1))
        nan = misplaced = False
        errs, norms, max_abs = [], [], 0.0
        for start in range(0, o_rows.shape[0], step):
            o, r = o_rows[start:start + step].double(), r_rows[start:start + step].double()
            finite = torch.isfinite(r)
            nan = nan or bool(torch.isnan(o).any())
            misplaced = misplaced or bool(torch.where(finite, ~torch.isfinite(o), o != r).any())
            diff = o.where(finite, 0.0) - r.where(finite, 0.0)
            errs.append(diff.norm(dim=-1))
            norms.append(r.where(finite, 0.0).norm(dim=-1))
            if diff.numel():
                max_abs = max(max_abs, diff.abs().max().item())
        if nan:
            return CheckResult(False, f"{name}: contains NaN")
        if misplaced:
            return CheckResult(False, f"{name}: infinities differ from the expected output")
        if not errs:
            return CheckResult(True, "")
        err, norm = torch.cat(errs), torch.cat(norms)
        scale = norm + self.floor * norm.pow(2).mean().sqrt()
        rel = (err / scale.clamp(min=1e-30)).max().item()
        bad = err > self.max_rel * scale
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            index = list(torch.unravel_index(torch.tensor(i), ref.shape[:-1])) if ref.dim() > 1 else []
            return CheckResult(False, f"{name}: {int(bad.sum())} of {len(err)} rows off by more than {self.max_rel:g} "
                                      f"of their norm; first at {[int(x) for x in index]}: error "
                                      f"{err[i].item():.3g}, row norm {norm[i].item():.3g}", max_abs, rel)
        return CheckResult(True, "", max_abs, rel)

    def describe(self, dtype):
        return (f"the 2-norm error of every row (last dimension) within {self.max_rel:g} times (the row's norm + "
                f"{self.floor:g} times the rows' root-mean-square norm) ({self.why})")

    def problem(self, dtype):
        if not dtype.is_floating_point:
            return f"NormwiseError is for float outputs, not {dtype_name(dtype)}"
        return None
