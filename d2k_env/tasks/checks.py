"""Checkers: how a solution's outputs are compared with the expected ones (the baseline's).

A task's ``check`` is a :class:`Check`: called with ``(outputs, expected, inputs)`` (tuples of
tensors, already known to have the right count, dtypes, shapes and device), it returns a
:class:`~d2k_env.task.CheckResult`; ``describe`` writes the "Checked:" sentence of the task's
description, so what the prompt promises is what runs.

Most tasks compare output by output (:class:`PerOutput`), each output with an
:class:`OutputCheck`; an output the task does not name gets :func:`default_check` for its dtype:
one rounding step for bf16/fp16/fp8, :data:`FLOAT_TOLERANCES` for fp32/fp64, exact otherwise.
NaN never passes, and infinities must appear exactly where the expected output has them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from d2k_env.task import CheckResult

# (atol, rtol) for wide float outputs. fp32 math in another summation order moves a result by a few
# ulps (1e-7 relative each), far inside 1e-4; rounding an intermediate to bf16 or fp16 (3.9e-3 and
# 4.9e-4 relative) does not fit. fp64 likewise, to its own precision.
FLOAT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
}
# Where terms cancel, fp32 error is relative to the terms, not to the result: errors up to this
# fraction of the largest expected magnitude (a few fp32 roundings of the terms) pass too.
CANCELLATION_FLOOR = 2.0 ** -18


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def is_narrow_float(dtype: torch.dtype) -> bool:
    """bf16, fp16 and the fp8 formats: a rounding step is large enough to check in steps."""
    return dtype.is_floating_point and torch.finfo(dtype).bits <= 16


def dtype_step(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype``'s values around each ``|ref|``: one rounding step there."""
    fi = torch.finfo(dtype)
    # frexp is exact on every device; floor(log2(...)) is not (CUDA's double log2(8) can land under 3,
    # which halved the step at every power of two and failed honest kernels on the GPU).
    _, exponent = torch.frexp(ref.abs().clamp(min=fi.tiny))
    return torch.ldexp(torch.full_like(ref, fi.eps, dtype=torch.float64), exponent - 1)


def compare_output(name: str, out: torch.Tensor, ref: torch.Tensor, bound: Callable, rel_floor: float,
                   bound_text: str) -> CheckResult:
    """One output against its expected value: NaN never passes, infinities must appear exactly where
    the expected output has them, and every finite element must be within ``bound(|ref|)`` of it."""
    o, r = out.double(), ref.double()
    if torch.isnan(o).any():
        return CheckResult(False, f"{name}: contains NaN")
    finite = torch.isfinite(r)
    if not torch.equal(o[~finite], r[~finite]) or not torch.isfinite(o[finite]).all():
        return CheckResult(False, f"{name}: infinities differ from the expected output")
    if not finite.any():
        return CheckResult(True, "")
    err, magnitude = (o - r).abs()[finite], r.abs()[finite]
    max_abs, max_rel = err.max().item(), (err / magnitude.clamp(min=rel_floor)).max().item()
    bad = torch.zeros_like(finite)
    bad[finite] = err > bound(magnitude)
    if bad.any():
        idx = tuple(int(i) for i in torch.nonzero(bad)[0])
        return CheckResult(False, f"{name}: {int(bad.sum())} of {out.numel()} elements {bound_text}; first at "
                                  f"{list(idx)}: got {o[idx].item():.6g}, expected {r[idx].item():.6g}",
                           max_abs, max_rel)
    return CheckResult(True, "", max_abs, max_rel)


class OutputCheck(ABC):
    """How one output is compared with its expected value."""

    @abstractmethod
    def verdict(self, name: str, out: torch.Tensor, ref: torch.Tensor) -> CheckResult:
        """The comparison; a failure's message starts with the output's name."""

    @abstractmethod
    def describe(self, dtype: torch.dtype) -> str:
        """What is checked, as a phrase ("every element within ..."), for an output of ``dtype``."""

    def problem(self, dtype: torch.dtype) -> str | None:
        """Why this check cannot apply to an output of ``dtype`` (None when it can)."""
        return None


@dataclass(frozen=True)
class OneStep(OutputCheck):
    """Every element within one rounding step of its dtype (bf16, fp16, fp8) of the expected value.

    For outputs computed in fp32 and rounded once: another summation order can move the fp32 value
    across a rounding boundary (one step); rounding intermediates or computing in the narrow dtype
    moves it further. ``cancellation`` (a fraction of the largest expected magnitude) also admits
    the fp32 error of cancelling terms; 0 for outputs that are not sums (quantised codes)."""

    cancellation: float = CANCELLATION_FLOOR
    why: str = "fp32 math rounded once lands there whatever the summation order; narrower arithmetic inside does not"

    def verdict(self, name, out, ref):
        floor = 0.0
        if self.cancellation:
            r = ref.double()
            finite = r[torch.isfinite(r)]
            floor = self.cancellation * (finite.abs().max().item() if finite.numel() else 0.0)
        return compare_output(name, out, ref, lambda m: dtype_step(m, out.dtype) + floor, torch.finfo(out.dtype).tiny,
                              f"more than one {dtype_name(out.dtype)} step off")

    def describe(self, dtype):
        return f"every element within one {dtype_name(dtype)} step of the expected value ({self.why})"

    def problem(self, dtype):
        if not is_narrow_float(dtype):
            return f"OneStep is for bf16, fp16 and fp8 outputs, not {dtype_name(dtype)} (use Tolerance)"
        return None


@dataclass(frozen=True)
class Tolerance(OutputCheck):
    """Every element within ``atol + rtol * |expected|``."""

    atol: float
    rtol: float
    why: str = "a few fp32 roundings in any order; a half-precision step inside does not fit"

    def verdict(self, name, out, ref):
        return compare_output(name, out, ref, lambda m: self.atol + self.rtol * m, self.atol or 1e-30,
                              f"outside atol={self.atol:g}, rtol={self.rtol:g}")

    def describe(self, dtype):
        return f"every element within {self.atol:g} + {self.rtol:g} * |expected| ({self.why})"

    def problem(self, dtype):
        return None if dtype.is_floating_point else f"Tolerance is for float outputs, not {dtype_name(dtype)}"


@dataclass(frozen=True)
class RelativeError(OutputCheck):
    """Every element within a relative error of ``max_rel`` (for outputs that are never zero, such as
    quantisation scales)."""

    max_rel: float
    why: str = "fp32 rounding"

    def verdict(self, name, out, ref):
        err = ((out.double() - ref.double()).abs() / ref.double().abs()).max().item()
        if not err <= self.max_rel:  # NaN fails too
            return CheckResult(False, f"{name} differ: max relative error {err:.3g} > {self.max_rel:g}", 0.0, err)
        return CheckResult(True, "", 0.0, err)

    def describe(self, dtype):
        return f"every element within a relative error of {self.max_rel:g} ({self.why})"

    def problem(self, dtype):
        return None if dtype.is_floating_point else f"RelativeError is for float outputs, not {dtype_name(dtype)}"


@dataclass(frozen=True)
class Exact(OutputCheck):
    """Every element equal to the expected one (integer and boolean outputs)."""

    def verdict(self, name, out, ref):
        return compare_output(name, out, ref, lambda m: 0.0, 1e-30, "differ from the expected values")

    def describe(self, dtype):
        return "every element exactly as expected"


def changed_elements(name: str, out: torch.Tensor, ref: torch.Tensor, max_fraction: float, min_allowed: int,
                     why: str) -> CheckResult:
    """Fails when more elements differ from the expected ones than ``max_fraction`` of them (at least
    ``min_allowed``)."""
    changed = int((out != ref).sum())  # same dtype (the contract checked it): exact, and no copies
    allowed = max(min_allowed, int(max_fraction * out.numel()))
    if changed > allowed:
        return CheckResult(False, f"{name}: {changed} of {out.numel()} elements ({changed / out.numel():.2%}) differ "
                                  f"from the expected values, more than {max_fraction:.1%}: {why}")
    return CheckResult(True, "")


@dataclass(frozen=True)
class Quantised(OutputCheck):
    """Quantised codes: every element within one step of its dtype, and at most ``max_changed`` of
    them (a fraction; at least ``min_allowed`` elements) off at all. Computing in fp32 and rounding
    once moves a code only at the few exact ties a low-precision input produces; computing in lower
    precision moves many more."""

    max_changed: float
    min_allowed: int = 8
    why: str = "fp32 math rounded once differs only at exact ties"

    def verdict(self, name, out, ref):
        steps = OneStep(cancellation=0.0).verdict(name, out, ref)
        if not steps.ok:
            return steps
        changed = changed_elements(name, out, ref, self.max_changed, self.min_allowed, "lower precision inside")
        return CheckResult(changed.ok, changed.message, steps.max_abs_err, steps.max_rel_err)

    def describe(self, dtype):
        return (f"every element within one {dtype_name(dtype)} step of the expected value, and at most "
                f"{self.max_changed:.1%} of them off at all ({self.why})")

    def problem(self, dtype):
        return OneStep().problem(dtype)


@dataclass(frozen=True)
class SampleAgreement(OutputCheck):
    """Sampled values (token ids, accepted counts): at most ``max_mismatch`` of the elements (a
    fraction; at least ``min_allowed``) may differ from the expected ones. Sampling tasks take their
    noise as inputs, so an honest kernel draws the same samples except where fp32 rounding decides a
    near-tie of the noise race; a kernel sampling from a wrong distribution differs far more often."""

    max_mismatch: float
    min_allowed: int = 1
    why: str = "the noise is an input; only near-ties may go the other way"

    def verdict(self, name, out, ref):
        return changed_elements(name, out, ref, self.max_mismatch, self.min_allowed, "not the expected samples")

    def describe(self, dtype):
        return f"at most {self.max_mismatch:.2%} of the samples differ from the expected ones ({self.why})"


def default_check(dtype: torch.dtype) -> OutputCheck:
    """One step for narrow floats, :data:`FLOAT_TOLERANCES` for wide floats, exact otherwise."""
    if is_narrow_float(dtype):
        return OneStep()
    if dtype in FLOAT_TOLERANCES:
        return Tolerance(*FLOAT_TOLERANCES[dtype])
    return Exact()


class Check(ABC):
    """A task's whole checker, for checks that compare outputs together (id sets with their weights,
    say); :class:`PerOutput` is the usual one."""

    @abstractmethod
    def verdict(self, outputs: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor],
                inputs: tuple) -> CheckResult:
        """The verdict on a solution's outputs, each keyed by its name."""

    @abstractmethod
    def describe(self, outputs: Sequence) -> str:
        """The description's "Checked:" sentence (without that word), for the task's ``Output`` list."""

    def problem(self, outputs: Sequence) -> str | None:
        """Why this checker cannot check these outputs (None when it can)."""
        return None


@dataclass(frozen=True)
class Alternative:
    """A second accepted answer: ``expected(inputs)`` returns the outputs (a tuple, in the task's
    order) of another legitimate order of computation, which ``why`` names; the same per-output
    checks apply."""

    expected: Callable[[tuple], tuple]
    why: str


@dataclass(frozen=True)
class PerOutput(Check):
    """Each output with its own check: ``checks[name]``, else :func:`default_check` for its dtype.
    Every output is compared; the verdict names each failing one. With an ``alternative``, outputs
    that fail against the expected answer pass if they pass against the alternative one."""

    checks: Mapping[str, OutputCheck] = field(default_factory=dict)
    alternative: Alternative | None = None

    def _compare(self, outputs, expected) -> CheckResult:
        verdicts = [(self.checks.get(n) or default_check(o.dtype)).verdict(n, o, expected[n]) for n, o in outputs.items()]
        worst_abs = max((v.max_abs_err for v in verdicts), default=0.0)
        worst_rel = max((v.max_rel_err for v in verdicts), default=0.0)
        failed = [v.message for v in verdicts if not v.ok]
        return CheckResult(not failed, "; ".join(failed) or "every output as checked", worst_abs, worst_rel)

    def verdict(self, outputs, expected, inputs):
        verdict = self._compare(outputs, expected)
        if verdict.ok or self.alternative is None:
            return verdict
        other = self._compare(outputs, dict(zip(outputs, self.alternative.expected(inputs))))
        return other if other.ok else verdict

    def describe(self, outputs):
        clauses: list[tuple[list[str], str]] = []
        for o in outputs:
            phrase = (self.checks.get(o.name) or default_check(o.dtype)).describe(o.dtype)
            if clauses and clauses[-1][1] == phrase:
                clauses[-1][0].append(o.name)
            else:
                clauses.append(([o.name], phrase))
        text = "; ".join(f"{' and '.join(names)}: {phrase}" for names, phrase in clauses)
        if any(o.dtype.is_floating_point for o in outputs):
            text += ". NaN never passes; infinities must be exactly where the expected ones are"
        if self.alternative is not None:
            text += f". {self.alternative.why}"
        return text + "."

    def problem(self, outputs):
        names = {o.name for o in outputs}
        unknown = sorted(set(self.checks) - names)
        if unknown:
            return f"checks name {', '.join(map(repr, unknown))}, which is no output (outputs: {', '.join(sorted(names))})"
        for o in outputs:
            check = self.checks.get(o.name)
            if check is None:
                continue
            if not isinstance(check, OutputCheck):
                return f"checks[{o.name!r}] is a {type(check).__name__}, not an OutputCheck"
            why = check.problem(o.dtype)
            if why:
                return f"checks[{o.name!r}]: {why}"
        return None
