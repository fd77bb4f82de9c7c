"""Correctness: the output contract every solution must meet, then the task's numeric checker."""

from __future__ import annotations

import torch

from d2k_env.task import CheckResult, Task

# (atol, rtol) per output dtype. bf16 keeps 8 mantissa bits, so one rounding step is ~0.4% relative;
# two tolerated steps, plus fp32 reassociation, fit inside 2e-2. A half-precision downgrade of an
# fp32 output fails the fp32 bound.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def verdict_for(task: Task, outputs: tuple, expected: tuple, inputs: tuple) -> CheckResult:
    """The full correctness verdict: contract, degenerate outputs, then the task's checker."""
    problem = check_contract(outputs, expected, task.outputs) or degenerate_output(outputs, expected, task.outputs)
    if problem:
        return CheckResult(False, problem)
    if task.checker:
        return task.checker(outputs, expected, inputs)
    return allclose_check(outputs, expected, task.outputs)


def degenerate_output(outputs, expected, names: list[str]) -> str | None:
    """An output with no variation where the expected one varies (a constant fill, say)."""
    for name, out, ref in zip(names, outputs, expected):
        if ref.numel() > 1 and out.numel() > 1:
            o, r = out.reshape(-1).double(), ref.reshape(-1).double()
            if bool((o == o[0]).all()) and not bool((r == r[0]).all()):
                return f"[degenerate] output {name!r} is constant ({o[0].item():g}) where the expected output varies"
    return None


def check_contract(outputs, expected, names: list[str]) -> str | None:
    """Structure of the outputs: count, exact tensor type, dtype, shape, device, row-major layout.
    None when fine."""
    if len(outputs) != len(expected):
        return f"forward returned {len(outputs)} value(s); expected {len(expected)} ({', '.join(names)})"
    for name, out, ref in zip(names, outputs, expected):
        if type(out) is not torch.Tensor:
            return f"output {name!r} is a {type(out).__name__}, not a torch.Tensor"
        if out.dtype != ref.dtype:
            return f"output {name!r} has dtype {out.dtype}; expected {ref.dtype}"
        if tuple(out.shape) != tuple(ref.shape):
            return f"output {name!r} has shape {tuple(out.shape)}; expected {tuple(ref.shape)}"
        if out.device != ref.device:
            return f"output {name!r} is on {out.device}; expected {ref.device}"
        if not out.is_contiguous():  # the documented layout is row-major; a transposed buffer is not it
            return f"output {name!r} is not contiguous (strides {out.stride()}); return row-major tensors"
    return None


def compare_output(name: str, out: torch.Tensor, ref: torch.Tensor, bound, rel_floor: float, bound_text: str
                   ) -> CheckResult:
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


def changed_elements_check(name: str, out: torch.Tensor, ref: torch.Tensor, max_fraction: float,
                           min_allowed: int = 8) -> CheckResult:
    """Fails when more elements differ from the expected output than ``max_fraction`` of them (at
    least ``min_allowed``): for a task whose every element may be one step off, this bounds how often.
    Computing in fp32 and rounding once moves an element only at the few exact ties an input of
    low precision produces; computing in lower precision moves many more."""
    changed = int((out != ref).sum())  # same dtype (the contract checked it): exact, and no copies
    allowed = max(min_allowed, int(max_fraction * out.numel()))
    if changed > allowed:
        return CheckResult(False, f"{name}: {changed} of {out.numel()} elements ({changed / out.numel():.2%}) differ "
                                  f"from the expected values, more than {max_fraction:.1%}: lower precision inside")
    return CheckResult(True, "")


def _all_outputs(verdicts, passed: str) -> CheckResult:
    """The first failing output's verdict, or a pass; either with the worst errors seen so far."""
    worst_abs = worst_rel = 0.0
    for verdict in verdicts:
        worst_abs, worst_rel = max(worst_abs, verdict.max_abs_err), max(worst_rel, verdict.max_rel_err)
        if not verdict.ok:
            return CheckResult(False, verdict.message, worst_abs, worst_rel)
    return CheckResult(True, passed, worst_abs, worst_rel)


def _tolerance_verdict(name: str, out: torch.Tensor, ref: torch.Tensor,
                       tolerance: tuple[float, float] | None = None) -> CheckResult:
    # Integer or boolean outputs must match exactly.
    atol, rtol = tolerance or TOLERANCES.get(out.dtype, (0.0, 0.0))
    return compare_output(name, out, ref, lambda m: atol + rtol * m, atol or 1e-30,
                          f"outside atol={atol:g}, rtol={rtol:g}")


def allclose_check(outputs, expected, names: list[str]) -> CheckResult:
    """Default checker: every element within the dtype's tolerance; NaN never passes, and infinities
    must appear exactly where the expected output has them."""
    return _all_outputs((_tolerance_verdict(n, o, r) for n, o, r in zip(names, outputs, expected)),
                        "all elements within tolerance")


CANCELLATION_FLOOR = 2.0 ** -18  # of the largest expected magnitude: a few fp32 roundings of the terms


def dtype_step(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype``'s values around each ``|ref|``: one rounding step there."""
    fi = torch.finfo(dtype)
    # frexp is exact on every device; floor(log2(...)) is not (CUDA's double log2(8) can land under 3,
    # which halved the step at every power of two and failed honest kernels on the GPU).
    _, exponent = torch.frexp(ref.abs().clamp(min=fi.tiny))
    return torch.ldexp(torch.full_like(ref, fi.eps, dtype=torch.float64), exponent - 1)


def _one_step_verdict(name: str, out: torch.Tensor, ref: torch.Tensor,
                      tolerance: tuple[float, float] | None = None) -> CheckResult:
    if not (out.dtype.is_floating_point and out.element_size() <= 2):
        return _tolerance_verdict(name, out, ref, tolerance)
    r = ref.double()
    finite = r[torch.isfinite(r)]
    floor = CANCELLATION_FLOOR * (finite.abs().max().item() if finite.numel() else 0.0)
    return compare_output(name, out, ref, lambda m: dtype_step(m, out.dtype) + floor, torch.finfo(out.dtype).tiny,
                          f"more than one {str(out.dtype).replace('torch.', '')} step off")


def one_step_check(outputs, expected, names: list[str],
                   tolerances: dict[str, tuple[float, float]] | None = None) -> CheckResult:
    """Every element of each narrow float output (bf16, fp16, fp8) within one step of its dtype of the
    expected value; wider outputs as :func:`allclose_check`, or within ``tolerances[name]`` (atol, rtol)
    where a task gives one. NaN never passes; infinities must match.

    For a task whose outputs are computed in fp32 and rounded once: a different summation order can
    move the fp32 value across a rounding boundary (one step), while rounding intermediates or
    computing in the narrow dtype (a precision downgrade) moves it further. Where terms cancel, the
    fp32 error is relative to the terms rather than the result, so errors up to ``CANCELLATION_FLOOR``
    of the largest expected magnitude pass too (far below a bf16 step of typical values).
    """
    tolerances = tolerances or {}
    return _all_outputs((_one_step_verdict(n, o, r, tolerances.get(n)) for n, o, r in zip(names, outputs, expected)),
                        "every element within one step of its dtype of the expected value")
