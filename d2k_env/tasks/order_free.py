"""Checking an integer output whose entries may come in any order within segments.

A counting sort that places items with atomics (``moe_align_block_size``: each token claims the next
free slot of its expert) lists the items of a segment in an order that varies from run to run; a
consumer that only reads the segment as a set cannot tell. :class:`OrderFreeWithin` checks such an
output: ``segments(inputs, expected) -> int64`` labels every position of the expected output with its
segment (-1: this position must match exactly), and the output passes when every exact position
matches and each segment holds the same multiset of values as expected. The task's other outputs are
checked by a :class:`~d2k_env.tasks.checks.PerOutput` (``others``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from d2k_env.task import CheckResult
from d2k_env.tasks.checks import Check, PerOutput


def _segment_sorted(values: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """``values`` ordered by segment, then by value: equal for two outputs whose segments hold the
    same multisets."""
    by_value = values.sort(stable=True)
    seg = segments[by_value.indices]
    return by_value.values[seg.sort(stable=True).indices]


@dataclass(frozen=True)
class OrderFreeWithin(Check):
    """``output`` exact except for the order of its entries inside each segment (see the module
    docstring); ``segment_text`` names a segment in the description ("one expert's tokens")."""

    output: str
    segments: Callable[[tuple, Mapping[str, torch.Tensor]], torch.Tensor]
    segment_text: str
    others: PerOutput = field(default_factory=PerOutput)

    def verdict(self, outputs, expected, inputs):
        out, ref = outputs[self.output].reshape(-1), expected[self.output].reshape(-1)
        seg = self.segments(inputs, expected).reshape(-1).to(torch.int64)
        exact = seg < 0
        message = ""
        if not torch.equal(out[exact], ref[exact]):
            bad = (exact & (out != ref)).nonzero()[0].item()
            message = (f"{self.output}: {int((exact & (out != ref)).sum())} fixed entries differ; first at [{bad}]: "
                       f"got {out[bad].item()}, expected {ref[bad].item()}")
        elif not torch.equal(_segment_sorted(out[~exact], seg[~exact]), _segment_sorted(ref[~exact], seg[~exact])):
            diff = [int(s) for s in seg[~exact].unique()
                    if not torch.equal(out[seg == s].sort().values, ref[seg == s].sort().values)]
            message = (f"{self.output}: {len(diff)} segments ({self.segment_text}) do not hold the expected values in "
                       f"any order; first: segment {diff[0]}")
        rest = {n: o for n, o in outputs.items() if n != self.output}
        others = self.others.verdict(rest, {n: expected[n] for n in rest}, inputs) if rest else CheckResult(True, "")
        failed = "; ".join(m for m, ok in ((message, not message), (others.message, others.ok)) if not ok)
        return CheckResult(not failed, failed or "every output as checked", others.max_abs_err, others.max_rel_err)

    def describe(self, outputs):
        mine = (f"{self.output}: every entry exactly as expected, except that within {self.segment_text} the "
                f"entries may come in any order")
        rest = [o for o in outputs if o.name != self.output]
        return mine + ("; " + self.others.describe(rest) if rest else ".")

    def problem(self, outputs):
        by_name = {o.name: o for o in outputs}
        if self.output not in by_name:
            return f"output names {self.output!r}, which is no output"
        if by_name[self.output].dtype.is_floating_point:
            return f"{self.output!r} is a float output: order-free comparison is exact, for integer outputs"
        return self.others.problem([o for o in outputs if o.name != self.output])
