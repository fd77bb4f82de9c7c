"""Checks for outputs that are long sums whose terms cancel (weight gradients, column sums, GEMM
entries): fp32 error there is relative to the terms, not to the result, so a plain relative
tolerance fails honest kernels on the entries that cancel to near zero.

:class:`SumTolerance` bounds every element's error by ``rtol * |expected| + floor * max|expected|``:
the floor, a fraction of the output's largest expected magnitude, admits the error an fp32 sum
makes in any order (a task states, in ``why``, the accumulation length it was derived for and what
was measured); it must stay far below what a rounding to bf16 or fp16 inside the sum moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.tasks.checks import OutputCheck, compare_output, dtype_name


@dataclass(frozen=True)
class SumTolerance(OutputCheck):
    """Every element within ``rtol * |expected| + floor * max|expected|`` (the max over the output's
    finite elements). ``floor`` is a fraction in (0, 1e-3): larger would let a scaled output through."""

    rtol: float
    floor: float
    why: str

    def __post_init__(self):
        if not (0 < self.floor < 1e-3 and 0 <= self.rtol < 1e-3):
            raise ValueError(f"SumTolerance: floor in (0, 1e-3) and rtol in [0, 1e-3) (got floor={self.floor:g}, "
                             f"rtol={self.rtol:g}): a looser bound passes an output scaled by 1 + 1e-3")
        if not self.why.strip():
            raise ValueError("SumTolerance: why must state the accumulation the floor was derived for")

    def verdict(self, name, out, ref):
        r = ref.double()
        finite = r[torch.isfinite(r)]
        absolute = self.floor * (finite.abs().max().item() if finite.numel() else 0.0)
        return compare_output(name, out, ref, lambda m: self.rtol * m + absolute, max(absolute, 1e-30),
                              f"outside {self.rtol:g} * |expected| + {self.floor:.3g} * max|expected|")

    def describe(self, dtype):
        return (f"every element within {self.rtol:g} * |expected| + {self.floor:.3g} * the largest |expected| "
                f"({self.why})")

    def problem(self, dtype):
        if dtype not in (torch.float32, torch.float64):
            return f"SumTolerance is for fp32 and fp64 sums, not {dtype_name(dtype)} (use OneStep)"
        return None
