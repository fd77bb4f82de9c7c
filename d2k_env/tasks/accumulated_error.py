"""Checking a GEMM-like output against an error bound of the whole output, not of each element alone.

A product summed over a long K, with intermediates rounded to bf16 the way serving kernels round them
(an activation between two GEMMs, per-expert partial results before a weighted sum), moves each
output element by an amount set by the output's overall scale, not by its own value: an element that
cancels to near zero still carries the error of its large terms. So :class:`AccumulatedError` bounds
every element by ``rtol * |expected| + max_fraction * rms(expected)`` (rounding of the element itself,
plus the worst tail of the spread), and the root-mean-square error by ``rms_fraction *
rms(expected)``. The second is what separates honest fp32 accumulation from a lower-precision one:
rounding the accumulator to bf16 every K block raises the RMS error several-fold while the few worst
elements may still fit the per-element bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import OutputCheck, compare_output


def rms(t: torch.Tensor) -> float:
    """Root mean square of the finite elements (0 when there are none)."""
    finite = t.double()[torch.isfinite(t)]
    return finite.pow(2).mean().sqrt().item() if finite.numel() else 0.0


@dataclass(frozen=True)
class AccumulatedError(OutputCheck):
    """Every element within ``rtol * |expected| + max_fraction * rms(expected)``, and the error's RMS
    at most ``rms_fraction * rms(expected)``; ``why`` says where the numbers come from."""

    rtol: float
    max_fraction: float
    rms_fraction: float
    why: str

    def verdict(self, name, out, ref):
        scale = rms(ref)
        floor = self.max_fraction * scale
        each = compare_output(name, out, ref, lambda m: self.rtol * m + floor, floor or 1e-30,
                              f"outside {self.rtol:g} * |expected| + {self.max_fraction:g} * rms(expected)")
        if not each.ok:
            return each
        finite = torch.isfinite(ref)
        err = rms(out.double()[finite] - ref.double()[finite])
        if err > self.rms_fraction * scale:
            return CheckResult(False, f"{name}: RMS error {err:.4g} is {err / scale:.4f} of the output's RMS "
                                      f"{scale:.4g}, more than {self.rms_fraction:g} (lower precision inside)",
                               each.max_abs_err, each.max_rel_err)
        return each

    def describe(self, dtype):
        return (f"every element within {self.rtol:g} * |expected| + {self.max_fraction:g} * rms(expected), and the "
                f"RMS error at most {self.rms_fraction:g} * rms(expected) ({self.why})")

    def problem(self, dtype):
        return None if dtype.is_floating_point else f"AccumulatedError is for float outputs, not {dtype}"
