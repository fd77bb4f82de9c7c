"""Error bounds from the accumulation: for outputs that are sums of many products (GEMMs).

A GEMM output element is a sum of K products. Its rounding error depends on how the sum was taken
(fp32 accumulators, an fp8 tensor core's narrower accumulator, partial sums promoted per block),
and every such error is bounded by a fraction of the sum of the magnitudes of the terms, not of
the result: terms of mixed signs cancel, the errors of adding them do not. So a fixed relative
tolerance on the result either refuses honest kernels where the result cancels or admits a wrong
one where it does not. :class:`AccumulationBound` derives each element's bound from the inputs:

    |out - expected| <= one rounding step of the output dtype at |expected| + rel * sum_k |term_k|

``terms(inputs)`` returns ``sum_k |term_k|`` per element (the task computes it from its inputs:
``|A| @ |B|^T`` for a GEMM), and ``rel`` is derived from the arithmetic the task allows (the
accumulator's precision times the number of additions a term goes through), stated in ``why``.
A dropped block of K, a wrong scale or a narrower accumulator moves elements by far more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check, PerOutput, compare_output, dtype_name, dtype_step, is_narrow_float


@dataclass(frozen=True)
class AccumulationBound(Check):
    """``output`` checked against a bound derived from its terms (module docstring); the task's
    other outputs with ``others`` (a :class:`PerOutput`, by default each with the default check of
    its dtype). ``terms(inputs)`` must return a float tensor of the output's shape; ``measure`` says
    in the description what it is, where it is more than the sum of the products' magnitudes."""

    output: str
    terms: Callable[[tuple], torch.Tensor]
    rel: float
    why: str
    others: PerOutput = field(default_factory=PerOutput)
    measure: str = "the sum of the magnitudes of the products it sums"

    def verdict(self, outputs: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], inputs: tuple):
        out, ref = outputs[self.output], expected[self.output]
        magnitude = self.terms(inputs)
        if tuple(magnitude.shape) != tuple(ref.shape):
            raise ValueError(f"the task's terms() gave shape {tuple(magnitude.shape)} for {self.output!r} of "
                             f"shape {tuple(ref.shape)}")
        slack = (self.rel * magnitude.double().abs()).to(ref.device)
        narrow = is_narrow_float(out.dtype)

        def bound(m):  # m: |expected| at the finite elements; the slack is indexed the same way below
            step = dtype_step(m, out.dtype) if narrow else torch.zeros_like(m, dtype=torch.float64)
            return step + slack[torch.isfinite(ref.double())]

        mine = compare_output(self.output, out, ref, bound, torch.finfo(out.dtype).tiny,
                              f"further from the expected value than {self.rel:g} times {self.measure}"
                              f"{' plus one ' + dtype_name(out.dtype) + ' step' if narrow else ''}")
        rest = {n: o for n, o in outputs.items() if n != self.output}
        if not rest:
            return mine
        theirs = self.others.verdict(rest, {n: expected[n] for n in rest}, inputs)
        failed = [v.message for v in (mine, theirs) if not v.ok]
        return CheckResult(not failed, "; ".join(failed) or "every output as checked",
                           max(mine.max_abs_err, theirs.max_abs_err), max(mine.max_rel_err, theirs.max_rel_err))

    def describe(self, outputs):
        mine = [o for o in outputs if o.name == self.output]
        dtype = mine[0].dtype if mine else torch.float32
        step = f"one {dtype_name(dtype)} step of the expected value plus " if is_narrow_float(dtype) else ""
        text = f"{self.output}: every element within {step}{self.rel:g} times {self.measure} ({self.why})"
        rest = [o for o in outputs if o.name != self.output]
        if rest:
            return text + "; " + self.others.describe(rest)
        return text + ". NaN never passes; infinities must be exactly where the expected ones are."

    def problem(self, outputs):
        names = [o.name for o in outputs]
        if self.output not in names:
            return f"output {self.output!r} is none of the task's outputs ({', '.join(names)})"
        dtype = outputs[names.index(self.output)].dtype
        if not dtype.is_floating_point:
            return f"AccumulationBound is for float outputs, not {dtype_name(dtype)}"
        if not callable(self.terms):
            return "terms must be a function of the inputs"
        if not (isinstance(self.measure, str) and self.measure.strip()):
            return "measure must say what terms(inputs) is"
        if not (isinstance(self.rel, float) and 0 < self.rel < 1):
            return f"rel must be a float in (0, 1), not {self.rel!r}"
        return self.others.problem([o for o in outputs if o.name != self.output])
