"""Checking a top-k selection whose order, and whose choice among tied candidates, is not unique.

A router returns, per row, ``k`` chosen ids and a weight for each. ``torch.topk`` fixes neither the
order of the ids nor which of several equal candidates is taken, so no single expected answer exists:
the checker asks instead whether the solution's own ids are *a* valid selection, and whether its
weights are the ones the task defines *for those ids*.

:class:`TopKSelection` is that checker. The task gives ``valid(inputs, ids) -> bool[rows]`` (which
rows' ids are a legitimate selection) and ``weights_of(inputs, ids) -> float64[rows, k]`` (the
weights of those ids, in their order). The checker first asks that every id be in range and that no
row repeat one (a tie "resolved" by taking the same candidate twice), then ``valid``, then compares
the weights, position by position, with ``weights_of`` of the solution's own ids.

Two ``valid`` building blocks: :func:`is_top_k` (no unchosen candidate beats a chosen one) and
:func:`is_grouped_top_k` (DeepSeek's grouped routing: the best groups first, then the best
candidates inside them). Both take a tolerance: keys the checker recomputes in float64 differ from a
kernel's fp32 keys by a few fp32 roundings, so candidates that close count as tied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check, OutputCheck, Tolerance


def _gather_keys(keys: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return keys.gather(-1, ids)


def _unchosen_max(keys: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The largest key per row among candidates not in ``ids`` (-inf when every one is chosen)."""
    rest = keys.clone()
    rest.scatter_(-1, ids, float("-inf"))
    return rest.amax(-1)


def is_top_k(keys: torch.Tensor, ids: torch.Tensor, tol: float) -> torch.Tensor:
    """Rows (bool) where ``ids`` [rows, k] (distinct, in range) are a top-k of ``keys`` [rows, n]
    (larger is better): no unchosen candidate's key exceeds the smallest chosen key by more than
    ``tol``. Any order of the ids, and any choice among tied candidates, passes."""
    keys = keys.double()
    return _unchosen_max(keys, ids) <= _gather_keys(keys, ids).amin(-1) + tol


def group_scores(keys: torch.Tensor, n_group: int, per_group: int) -> torch.Tensor:
    """DeepSeek's group score: the sum of the ``per_group`` largest keys of each of ``n_group``
    equal, consecutive groups of candidates. [rows, n] -> [rows, n_group]."""
    rows, n = keys.shape
    return keys.double().view(rows, n_group, n // n_group).topk(per_group, dim=-1).values.sum(-1)


def is_grouped_top_k(keys: torch.Tensor, ids: torch.Tensor, n_group: int, topk_group: int, per_group: int,
                     tol: float) -> torch.Tensor:
    """Rows (bool) where ``ids`` [rows, k] (distinct, in range) are what grouped top-k may choose:
    some ``topk_group`` groups that are a top-``topk_group`` of :func:`group_scores`, and within
    them a top-k of ``keys`` (both up to ``tol``: twice it for group scores, sums of two keys).

    The groups the solution chose are not returned, so the check finds the most favourable legal
    set: the groups its ids fall in (each must be among the best, up to ties), every group strictly
    better than the cut (it must have been chosen), and, to fill up, the tied groups whose best
    unchosen candidate is smallest. The ids are valid if that set has at most ``topk_group`` groups
    and no candidate of it left out beats the smallest chosen key."""
    keys = keys.double()
    rows, n = keys.shape
    per = n // n_group
    gs = group_scores(keys, n_group, per_group)
    cut = gs.topk(topk_group, dim=-1).values[:, -1:]  # the score of the last group chosen
    gtol = 2 * tol
    group_of = ids // per
    used = torch.zeros(rows, n_group, dtype=torch.bool, device=keys.device)
    used.scatter_(1, group_of, True)
    above = gs > cut + gtol                      # strictly better than the cut: always chosen
    tied = (gs >= cut - gtol) & ~above           # at the cut: any of them may be chosen
    used_ok = ~(used & ~(above | tied)).any(-1)  # no id from a group below the cut
    must = used | above
    fill = topk_group - must.sum(-1)
    # The best unchosen candidate of every group: what the solution passed over there.
    rest = keys.clone()
    rest.scatter_(1, ids, float("-inf"))
    group_rest = rest.view(rows, n_group, per).amax(-1)
    must_rest = torch.where(must, group_rest, float("-inf")).amax(-1)
    optional = torch.where(tied & ~must, group_rest, float("inf")).sort(-1).values
    # Filling f groups from the tied ones costs the f-th smallest of their best unchosen keys.
    fill_idx = (fill - 1).clamp(min=0, max=n_group - 1).unsqueeze(-1)
    fill_rest = torch.where(fill > 0, optional.gather(1, fill_idx).squeeze(-1), float("-inf"))
    enough = fill_rest < float("inf")  # enough tied groups to fill up (always, when the ids are legal)
    worst_left_out = torch.maximum(must_rest, fill_rest)
    return used_ok & (fill >= 0) & enough & (worst_left_out <= _gather_keys(keys, ids).amin(-1) + tol)


@dataclass(frozen=True)
class TopKSelection(Check):
    """A top-k selection: ``ids`` (an integer output [..., k]) and, optionally, ``weights`` (a float
    output of the same shape, one weight per id in the same position).

    A row passes when its ids are in ``[0, n_candidates)``, distinct, and ``valid(inputs, ids)``
    holds for it; the weights, when named, must then pass ``weight_check`` against
    ``weights_of(inputs, ids)`` (the weights the task defines for the solution's own ids, in their
    order). ``rule`` says in words what ``valid`` accepts; ``n_candidates(inputs)`` is the number of
    candidates a row chooses from."""

    ids: str
    n_candidates: Callable[[tuple], int]
    valid: Callable[[tuple, torch.Tensor], torch.Tensor]
    rule: str
    weights: str | None = None
    weights_of: Callable[[tuple, torch.Tensor], torch.Tensor] | None = None
    weight_check: OutputCheck = Tolerance(1e-6, 1e-5, why="a few fp32 roundings")

    def verdict(self, outputs, expected, inputs):
        ids = outputs[self.ids]
        k = ids.shape[-1] if ids.dim() else 0
        flat = ids.reshape(-1, k).long() if k else ids.reshape(-1, 1).long()
        n = self.n_candidates(inputs)
        in_range = ((flat >= 0) & (flat < n)).all(-1)
        if not in_range.all():
            row = int((~in_range).nonzero()[0])
            return CheckResult(False, f"{self.ids}: row {row} has ids outside [0, {n}): {flat[row].tolist()}")
        ordered = flat.sort(-1).values
        repeated = (ordered[:, 1:] == ordered[:, :-1]).any(-1)
        if repeated.any():
            row = int(repeated.nonzero()[0])
            return CheckResult(False, f"{self.ids}: row {row} chooses an id twice: {flat[row].tolist()} "
                                      f"(tied candidates are distinct choices)")
        ok = self.valid(inputs, flat).reshape(-1)
        if not ok.all():
            row = int((~ok).nonzero()[0])
            return CheckResult(False, f"{self.ids}: {int((~ok).sum())} of {ok.numel()} rows are not a valid "
                                      f"selection ({self.rule}); first: row {row}, {flat[row].tolist()}")
        if self.weights is None:
            return CheckResult(True, "")
        want = self.weights_of(inputs, flat).reshape(outputs[self.weights].shape)
        got = outputs[self.weights]
        return self.weight_check.verdict(f"{self.weights} (against the weights of the chosen ids)", got, want)

    def describe(self, outputs):
        text = (f"{self.ids}: in each row, distinct ids in range that are a valid selection ({self.rule}), in any "
                "order and with any choice among tied candidates")
        if self.weights is not None:
            dtype = next(o.dtype for o in outputs if o.name == self.weights)
            text += (f"; {self.weights}: the weights of the row's own ids in the same positions, "
                     f"{self.weight_check.describe(dtype)}. NaN never passes")
        return text + "."

    def problem(self, outputs):
        by_name = {o.name: o for o in outputs}
        unchecked = sorted(set(by_name) - {self.ids, self.weights})
        if unchecked:
            return f"outputs {', '.join(map(repr, unchecked))} are neither ids nor weights: nothing would check them"
        if self.ids not in by_name:
            return f"ids names {self.ids!r}, which is no output"
        if by_name[self.ids].dtype.is_floating_point or by_name[self.ids].dtype == torch.bool:
            return f"ids output {self.ids!r} must be an integer dtype"
        if (self.weights is None) != (self.weights_of is None):
            return "weights and weights_of go together"
        if self.weights is not None:
            if self.weights not in by_name:
                return f"weights names {self.weights!r}, which is no output"
            return self.weight_check.problem(by_name[self.weights].dtype)
        return None
