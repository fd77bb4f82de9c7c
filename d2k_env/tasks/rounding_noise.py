"""A checker for outputs whose honest error is rounding noise of a size the inputs determine.

Tensor-core kernels round some fp32 intermediate to a narrow dtype before a product and accumulate
in fp32: flash attention rounds each probability to bf16 before P·V, a GEMM epilogue may round a
partial sum. Each rounding is a relative error of at most one unit roundoff ``u`` (2**-8 for bf16,
round to nearest), independent from term to term, so the output's error is a sum
``sum_j a_j * delta_j`` whose standard deviation is at most ``u / sqrt(3) * sqrt(sum_j a_j**2)``
(the ``a_j`` are the terms a rounding scales, in the units of the output). The task computes that
standard deviation per element from the inputs (:class:`RoundingNoise`'s ``sigma``); the check
allows ``sigmas`` of it, plus one rounding step of the output's dtype (the final round).

Why not a fixed tolerance: the noise scales with the output's terms, not with the output (an
average of many cancelling values is small, its noise is not), and with the accumulation length
(its square root). A fixed atol loose enough for the noisiest element lets a lower-precision
computation through everywhere else; this bound follows every element. A kernel that rounds
something larger (scores to bf16 before the exponential: a relative error of ``u`` times the score,
not ``u``) or skips a rescale lands many standard deviations out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check, PerOutput, compare_output, dtype_name, dtype_step, is_narrow_float


def noise_sigma(weights_sq_dot_terms_sq: torch.Tensor, total: torch.Tensor, unit_roundoff: float) -> torch.Tensor:
    """The standard deviation bound ``u / sqrt(3) * sqrt(sum_j w_j**2 * t_j**2) / |sum_j w_j|`` of a
    normalised sum ``sum_j w_j * t_j / sum_j w_j`` whose weights are each rounded once, given the
    numerator ``sum_j w_j**2 * t_j**2`` and ``sum_j w_j`` (broadcastable)."""
    return unit_roundoff / 3 ** 0.5 * weights_sq_dot_terms_sq.clamp(min=0).sqrt() / total.abs()


@dataclass(frozen=True)
class RoundingNoise(Check):
    """Output ``output`` (bf16, fp16 or fp8): every element within one step of its dtype plus
    ``sigmas`` times ``sigma(inputs)`` (a tensor broadcastable to the output, the standard deviation
    of the rounding noise an honest kernel adds, in the output's units) of the expected value. The
    other outputs are checked by ``rest`` (a :class:`PerOutput`). ``noise`` names the rounding for
    the description, ``why`` says why the multiple is safe for honest kernels and tight for wrong
    ones."""

    output: str
    sigma: Callable[[tuple], torch.Tensor]
    sigmas: float
    noise: str
    why: str
    rest: PerOutput = field(default_factory=PerOutput)

    def verdict(self, outputs, expected, inputs):
        out, ref = outputs[self.output], expected[self.output]
        sigma = self.sigma(inputs).to(device=ref.device, dtype=torch.float64).expand(ref.shape)
        finite = torch.isfinite(ref)
        allowed = self.sigmas * sigma[finite]
        mine = compare_output(self.output, out, ref, lambda m: dtype_step(m, out.dtype) + allowed,
                              torch.finfo(out.dtype).tiny,
                              f"more than one {dtype_name(out.dtype)} step plus {self.sigmas:g} sigma off")
        others = {n: o for n, o in outputs.items() if n != self.output}
        if not others:
            return mine
        theirs = self.rest.verdict(others, {n: expected[n] for n in others}, inputs)
        failed = [v.message for v in (mine, theirs) if not v.ok]
        return CheckResult(not failed, "; ".join(failed) or "every output as checked",
                           max(mine.max_abs_err, theirs.max_abs_err), max(mine.max_rel_err, theirs.max_rel_err))

    def describe(self, outputs: Sequence) -> str:
        mine = [o for o in outputs if o.name == self.output]
        others = [o for o in outputs if o.name != self.output]
        text = (f"{self.output}: every element within one {dtype_name(mine[0].dtype)} step of the expected value "
                f"plus {self.sigmas:g} standard deviations of {self.noise}, computed per element from the inputs "
                f"({self.why})")
        if others:
            text += "; " + self.rest.describe(others).removesuffix(".")
            return text + "."
        return text + ". NaN never passes; infinities must be exactly where the expected ones are."

    def problem(self, outputs: Sequence) -> str | None:
        named = [o for o in outputs if o.name == self.output]
        if not named:
            return f"output {self.output!r} is no output (outputs: {', '.join(o.name for o in outputs)})"
        if not is_narrow_float(named[0].dtype):
            return f"RoundingNoise is for bf16, fp16 and fp8 outputs, not {dtype_name(named[0].dtype)}"
        if not callable(self.sigma):
            return "sigma must be a function of the inputs"
        if not (isinstance(self.sigmas, (int, float)) and self.sigmas > 0):
            return f"sigmas must be a positive number, not {self.sigmas!r}"
        if self.output in self.rest.checks:
            return f"rest must not check {self.output!r} too"
        return self.rest.problem([o for o in outputs if o.name != self.output])
