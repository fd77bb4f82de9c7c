"""Design properties: what a solution of a task should realise, layer by layer, beyond being right.

D2K-Bench asks whether a solution realises the design its guidance describes (L1 algorithm, L2
dataflow, L3 low-level GPU tricks), not only whether it is fast. A task lists its properties in its
spec (``TaskSpec.design_properties``): each one a short, checkable statement tied to one layer.

A property whose truth follows from what the trusted side of an evaluation sees carries an automatic
check (:class:`AutoCheck`); the rest are left to the judge (an LLM reading the solution against the
guidance). Automatic checks read :class:`Facts`, gathered per workload by the replay from the
recording and, on the GPU, from its measurements. A fact the backend does not have (bytes moved on
the interpreter) leaves its property ``unchecked``: never guessed.

Findings never change the reward; they are reported beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

LAYERS = ("L1", "L2", "L3")
STATUSES = ("realised", "not realised", "unchecked")
_ID = re.compile(r"^[a-z][a-z0-9_]{2,47}$")


@dataclass(frozen=True)
class Facts:
    """What the trusted replay knows of one forward call on one workload.

    ``launches``: the kernels launched, by name, in order; ``kernels_using_dot``: the names of the
    launched kernels whose text, or that of a jit helper they call, calls ``tl.dot``; ``buffer_bytes``:
    each tensor forward allocated, in bytes (outputs included); ``output_bytes``: the outputs' bytes;
    ``input_bytes``: the inputs' bytes; ``bytes_moved`` and ``peak_bytes``: measured on the GPU
    (DRAM bytes read and written by the call's kernels; peak device memory above the inputs), None
    where the backend has no such measurement.
    """

    launches: tuple[str, ...]
    kernels_using_dot: frozenset[str]
    buffer_bytes: tuple[int, ...]
    output_bytes: int
    input_bytes: int
    bytes_moved: int | None = None
    peak_bytes: int | None = None


@dataclass(frozen=True)
class Finding:
    status: str  # one of STATUSES
    detail: str  # one line: what was seen


class AutoCheck:
    """An automatic check of one property from :class:`Facts`."""

    def finding(self, facts: Facts, roofline_bytes: float) -> Finding:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class MaxLaunches(AutoCheck):
    """At most ``most`` kernel launches per forward call."""

    most: int

    def __post_init__(self):
        if not (isinstance(self.most, int) and self.most >= 1):
            raise ValueError(f"MaxLaunches(most): a positive int, not {self.most!r}")

    def finding(self, facts, roofline_bytes):
        n = len(facts.launches)
        status = "realised" if n <= self.most else "not realised"
        return Finding(status, f"{n} launch{'es' if n != 1 else ''} per call ({', '.join(facts.launches[:6])}"
                               f"{', ...' if n > 6 else ''}); at most {self.most}")

    def describe(self):
        return f"at most {self.most} kernel launch{'es' if self.most != 1 else ''} per call"


@dataclass(frozen=True)
class UsesDot(AutoCheck):
    """Some launched kernel computes with ``tl.dot`` (tensor cores), not element-wise products."""

    def finding(self, facts, roofline_bytes):
        if facts.kernels_using_dot:
            return Finding("realised", f"tl.dot in {', '.join(sorted(facts.kernels_using_dot))}")
        return Finding("not realised", "no launched kernel calls tl.dot")

    def describe(self):
        return "a launched kernel calls tl.dot"


@dataclass(frozen=True)
class NoLargeIntermediate(AutoCheck):
    """No tensor forward allocates, besides its outputs, holds more than ``fraction`` of the
    outputs' bytes: an intermediate that size would be a materialised product (logits, a dequantised
    weight, an activation between two GEMMs) in global memory."""

    fraction: float

    def __post_init__(self):
        if not (isinstance(self.fraction, (int, float)) and self.fraction > 0):
            raise ValueError(f"NoLargeIntermediate(fraction): a positive number, not {self.fraction!r}")

    def finding(self, facts, roofline_bytes):
        limit = self.fraction * max(facts.output_bytes, 1)
        intermediates = sorted(facts.buffer_bytes)
        # The outputs are among the buffers: drop the largest ones that account for output_bytes.
        left = facts.output_bytes
        while intermediates and left > 0 and intermediates[-1] <= left:
            left -= intermediates.pop()
        largest = intermediates[-1] if intermediates else 0
        status = "realised" if largest <= limit else "not realised"
        return Finding(status, f"largest intermediate {largest} B; at most {limit:.0f} B "
                               f"({self.fraction:g} of the outputs' {facts.output_bytes} B)")

    def describe(self):
        return f"no intermediate buffer larger than {self.fraction:g} of the outputs"


@dataclass(frozen=True)
class BytesNearRoofline(AutoCheck):
    """DRAM traffic (measured on the GPU) at most ``factor`` times the roofline's bytes."""

    factor: float

    def __post_init__(self):
        if not (isinstance(self.factor, (int, float)) and self.factor >= 1):
            raise ValueError(f"BytesNearRoofline(factor): a number >= 1, not {self.factor!r}")

    def finding(self, facts, roofline_bytes):
        if facts.bytes_moved is None:
            return Finding("unchecked", "bytes moved were not measured (no backend reads a DRAM traffic counter yet)")
        ratio = facts.bytes_moved / max(roofline_bytes, 1.0)
        status = "realised" if ratio <= self.factor else "not realised"
        return Finding(status, f"{facts.bytes_moved} B moved, {ratio:.2f}x the roofline's; at most {self.factor:g}x")

    def describe(self):
        return f"DRAM traffic at most {self.factor:g}x the roofline's bytes (GPU)"


@dataclass(frozen=True)
class DesignProperty:
    """One checkable statement of a task's design, tied to the guidance layer it comes from."""

    id: str
    layer: str
    text: str
    check: AutoCheck | None = None  # None: the judge decides

    def __post_init__(self):
        if not (isinstance(self.id, str) and _ID.match(self.id)):
            raise ValueError(f"a property id is 3-48 characters of [a-z0-9_], starting with a letter: {self.id!r}")
        if self.layer not in LAYERS:
            raise ValueError(f"property {self.id}: layer must be one of {LAYERS}, not {self.layer!r}")
        if not (isinstance(self.text, str) and 10 <= len(self.text.strip()) <= 300 and "\n" not in self.text):
            raise ValueError(f"property {self.id}: text is one line of 10-300 characters")
        if self.check is not None and not isinstance(self.check, AutoCheck):
            raise ValueError(f"property {self.id}: check is an AutoCheck (MaxLaunches, UsesDot, ...) or None")


def check_properties(properties: Sequence[DesignProperty], error: Callable[[str, str, object], Exception]) -> None:
    """Raises ``error(field, expected, got)`` unless ``properties`` are valid for a spec: distinct
    ids, and at least one property for each layer."""
    if not isinstance(properties, (list, tuple)) or not all(isinstance(p, DesignProperty) for p in properties):
        raise error("design_properties", "a list of DesignProperty(id, layer, text, check=None)", properties)
    ids = [p.id for p in properties]
    if len(set(ids)) != len(ids):
        raise error("design_properties", "distinct ids", ids)
    missing = [layer for layer in LAYERS if not any(p.layer == layer for p in properties)]
    if properties and missing:
        raise error("design_properties", f"at least one property per layer (none for {', '.join(missing)})", ids)


def findings(properties: Sequence[DesignProperty], facts: Facts, roofline_bytes: float) -> dict[str, Finding]:
    """Each automatically checked property's finding on one workload; judge-only ones are absent."""
    return {p.id: p.check.finding(facts, roofline_bytes) for p in properties if p.check is not None}
