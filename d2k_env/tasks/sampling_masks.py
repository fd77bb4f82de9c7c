"""Checker for sampling masks: top-k / top-p (nucleus) masking of logits, with ties and rounding.

The answer to "keep the top k, then the smallest head of the distribution holding p of its mass"
is not one tensor: equal logits (bf16 logits cast to fp32 tie often) must be kept or masked
together, and where the mass above a candidate threshold is within fp32 rounding of p, either
side of it is an honest answer. :class:`TopKTopPMask` therefore does not compare with the expected
output; it checks the solution's own mask against the inputs:

1. every element is the input logit, unchanged, or ``-inf`` (NaN and +inf never pass);
2. per row, the kept elements are exactly those at or above one value ``t`` (the smallest kept
   logit): a tie group is never split;
3. ``t`` is at or above the k-th largest logit (top-k is exact: counts involve no rounding), and,
   with ``q`` the softmax of the logits kept by top-k (in float64), the mass of the logits strictly
   above ``t`` is below ``p + mass_tol`` and the mass at or above ``t`` reaches ``p - mass_tol``.

Without the tolerance, (3) is the exact definition: keep a logit iff the mass of the logits strictly
greater than it is below p.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check


def _first_bad_row(name: str, row: int, why: str) -> CheckResult:
    return CheckResult(False, f"{name}: row {row}: {why}")


@dataclass(frozen=True)
class TopKTopPMask(Check):
    """The single output ``output`` [B, V] (fp32) masks ``inputs[logits]`` [B, V] with per-row
    ``inputs[k]`` [B] (integers; k >= V keeps every logit) and ``inputs[p]`` [B] (1.0 keeps the
    whole distribution), as the module docstring states."""

    output: str = "masked"
    logits: int = 0
    k: int = 1
    p: int = 2
    mass_tol: float = 1e-4
    why: str = ("fp32 sums of the probabilities in any order stay well inside it; the threshold itself, the "
                "top-k cut and the kept values are exact")

    def verdict(self, outputs, expected, inputs):
        out = outputs[self.output].double()
        x = inputs[self.logits].double()
        ks = inputs[self.k].long().tolist()
        ps = inputs[self.p].double().tolist()
        name = self.output
        if torch.isnan(out).any():
            return CheckResult(False, f"{name}: contains NaN")
        kept = out > float("-inf")
        if not torch.equal(out[kept], x[kept]):
            rows = torch.nonzero(kept & (out != x))[0].tolist()
            return _first_bad_row(name, rows[0], f"a kept element differs from its logit at column {rows[1]} "
                                                 f"(got {out[tuple(rows)].item():.6g}, logit {x[tuple(rows)].item():.6g})")
        worst = 0.0
        for row in range(x.shape[0]):
            xr, kr = x[row], kept[row]
            finite = xr > float("-inf")
            if not bool(kr.any()):
                if bool(finite.any()):
                    return _first_bad_row(name, row, "every logit masked")
                continue
            t = xr[kr].min()
            if not torch.equal(kr, (xr >= t) & finite):
                return _first_bad_row(name, row, f"the kept logits are not all those at or above the smallest kept "
                                                 f"one ({t.item():.6g}): a tie group is split, or a logit skipped")
            k = min(max(ks[row], 1), xr.numel())
            kth = torch.topk(xr, k).values[-1]
            if t < kth:
                return _first_bad_row(name, row, f"keeps {int(kr.sum())} logits down to {t.item():.6g}, below the "
                                                 f"k-th largest ({kth.item():.6g}, k={ks[row]})")
            survivors = xr >= kth
            q = torch.softmax(torch.where(survivors, xr, float("-inf")), dim=0)
            above, at_or_above = q[xr > t].sum().item(), q[xr >= t].sum().item()
            p = ps[row]
            worst = max(worst, max(above - p, p - at_or_above, 0.0))
            if above >= p + self.mass_tol:
                return _first_bad_row(name, row, f"keeps logits down to {t.item():.6g}, but the mass above it is "
                                                 f"already {above:.6f} >= p={p:.6g} (+{self.mass_tol:g}): too many kept")
            if at_or_above < p - self.mass_tol:
                return _first_bad_row(name, row, f"keeps logits down to {t.item():.6g}, holding mass {at_or_above:.6f} "
                                                 f"< p={p:.6g} (-{self.mass_tol:g}): too few kept")
        return CheckResult(True, "every row's mask is a valid top-k/top-p threshold", worst, 0.0)

    def describe(self, outputs):
        return (f"{self.output}: every element is its logit unchanged or -inf; per row the kept logits are exactly "
                f"those at or above one threshold (ties kept or masked together), the threshold is at or above the "
                f"k-th largest logit, and the top-k survivors' softmax mass strictly above the threshold is below "
                f"p while the mass at or above it reaches p, each within {self.mass_tol:g} ({self.why}). NaN never "
                f"passes.")

    def problem(self, outputs):
        names = {o.name: o.dtype for o in outputs}
        if self.output not in names:
            return f"no output named {self.output!r} (outputs: {', '.join(names)})"
        if not names[self.output].is_floating_point:
            return f"{self.output!r} must be a float output (masked logits), not {names[self.output]}"
        return None
