"""Checker for speculative-decoding rejection sampling, whose noise is an input.

With the uniforms and the exponential race noise given, the output tokens are a function of the
inputs, except where fp32 rounding decides: an acceptance ratio within rounding of its uniform, or
two candidates of the race within rounding of each other. A near-tie in acceptance changes every
later token of the request, so counting mismatches (``SampleAgreement``) is the wrong tool.
:class:`RejectionSampled` replays each request along the solution's own tokens instead:

- position i < n (the request's draft count) holding the draft token is an acceptance where one is
  allowed: the draft probability positive and ratio = p_target / p_draft not below u by more than
  ``rel_tol`` of u;
- any other token at i < n, or the draft token where no acceptance is allowed, is the rejection: allowed unless the draft probability is positive and
  the ratio reaches u by more than ``rel_tol``; the token must win the race, its score
  max(p_target - p_draft, 0) / q within ``rel_tol`` of the best score of that position (float64);
  every later position holds the placeholder;
- after n acceptances position n holds the bonus token, and every later one the placeholder.
Ratios and scores are recomputed in float64 from the fp32 inputs; an fp32 subtraction of two
probabilities has a relative error of one rounding whatever the cancellation, so a few ulps of
tolerance separate honest orders of computation from a different rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check


@dataclass(frozen=True)
class RejectionSampled(Check):
    """The output ``output`` [B, K + 1] (integer tokens, ``placeholder`` past the end) of rejection
    sampling flattened drafts: ``inputs[draft_ids]`` [N], ``inputs[cu_num_drafts]`` [B] (inclusive
    cumulative draft counts), ``inputs[draft_probs]`` and ``inputs[target_probs]`` [N, V],
    ``inputs[bonus_ids]`` [B], ``inputs[uniforms]`` [N], ``inputs[noise]`` [B, V] (the exponential
    race noise of each request), as the module docstring states."""

    output: str = "output_token_ids"
    draft_ids: int = 0
    cu_num_drafts: int = 1
    draft_probs: int = 2
    target_probs: int = 3
    bonus_ids: int = 4
    uniforms: int = 5
    noise: int = 6
    placeholder: int = -1
    rel_tol: float = 1e-6
    why: str = "fp32 ratios and race scores in any honest order land within a few ulps of float64"

    def verdict(self, outputs, expected, inputs):
        out = outputs[self.output].long().cpu()
        drafts = inputs[self.draft_ids].long().cpu()
        ends = inputs[self.cu_num_drafts].long().cpu().tolist()
        bonus = inputs[self.bonus_ids].long().cpu().reshape(-1).tolist()
        u = inputs[self.uniforms].double().cpu()
        pd_all, pt_all, q_all = inputs[self.draft_probs], inputs[self.target_probs], inputs[self.noise]
        name, tol = self.output, self.rel_tol
        start = 0
        for b, end in enumerate(ends):
            n, row = end - start, out[b].tolist()
            rejected_at = None
            for i in range(n):
                pos, token = start + i, row[i]
                d = int(drafts[pos])
                pd, pt = float(pd_all[pos, d]), float(pt_all[pos, d])
                ratio = pt / pd if pd > 0 else None
                where = f"request {b}, draft {i}"
                may_accept = ratio is not None and ratio >= float(u[pos]) * (1 - tol)
                if token == d and may_accept:
                    continue
                if ratio is not None and ratio >= float(u[pos]) * (1 + tol):
                    return CheckResult(False, f"{name}: {where}: draft token {d} rejected (got {token}), but "
                                              f"p_target/p_draft = {ratio:.6g} reaches the uniform {float(u[pos]):.6g}")
                # A rejection. Its race can be won by the draft token itself only where the draft gave
                # that token probability 0 (elsewhere its residual is 0).
                scores = (pt_all[pos].double() - pd_all[pos].double()).clamp(min=0) / q_all[b].double()
                best = float(scores.max())
                if token == d and float(scores[d]) < best * (1 - tol):
                    return CheckResult(False, f"{name}: {where}: draft token {d} accepted, but p_target/p_draft = "
                                              f"{pt:.6g}/{pd:.6g} is below the uniform {float(u[pos]):.6g}"
                                              + (" (a zero draft probability always rejects)" if pd <= 0 else ""))
                if not 0 <= token < scores.numel() or float(scores[token]) < best * (1 - tol):
                    got = float(scores[token]) if 0 <= token < scores.numel() else float("nan")
                    return CheckResult(False, f"{name}: {where}: rejection resampled token {token} (race score "
                                              f"{got:.6g}), not the race winner {int(scores.argmax())} ({best:.6g})")
                rejected_at = i
                break
            tail = rejected_at + 1 if rejected_at is not None else n + 1
            if rejected_at is None and row[n] != bonus[b]:
                return CheckResult(False, f"{name}: request {b}: every draft accepted, so position {n} must hold the "
                                          f"bonus token {bonus[b]}; got {row[n]}")
            if any(t != self.placeholder for t in row[tail:]):
                return CheckResult(False, f"{name}: request {b}: positions from {tail} on must hold the placeholder "
                                          f"{self.placeholder}; got {row[tail:]}")
            start = end
        return CheckResult(True, "every request's tokens follow its acceptances, race and bonus")

    def describe(self, outputs):
        return (f"{self.output}: replayed request by request along the solution's own tokens: each accepted draft "
                f"has p_target/p_draft at or above its uniform, each rejection has it below (either way within a "
                f"relative {self.rel_tol:g}), a rejected position holds the winner of its race max(p_target - "
                f"p_draft, 0) / q (within a relative {self.rel_tol:g} of the best score), all drafts accepted are "
                f"followed by the bonus token, and every later position holds {self.placeholder} ({self.why}).")

    def problem(self, outputs):
        names = {o.name: o.dtype for o in outputs}
        if self.output not in names:
            return f"no output named {self.output!r} (outputs: {', '.join(names)})"
        if names[self.output].is_floating_point:
            return f"{self.output!r} must be an integer output (token ids), not {names[self.output]}"
        return None
