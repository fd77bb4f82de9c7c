"""Correctness: the output contract every solution must meet, then the task's own checker
(``d2k_env.tasks``: the checkers themselves are the task-author API)."""

from __future__ import annotations

import torch

from d2k_env.task import CheckResult, Task


def as_tuple(out) -> tuple:
    """forward's return value as a tuple of outputs (None: none, as a task that only updates inputs returns)."""
    if out is None:
        return ()
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def verdict_for(task: Task, outputs: tuple, expected: tuple, inputs: tuple) -> CheckResult:
    """The full correctness verdict: contract, degenerate outputs, then the task's checker."""
    names = task.checked_outputs
    problem = check_contract(outputs, expected, names) or degenerate_output(outputs, expected, names)
    if problem:
        return CheckResult(False, problem)
    return task.checker(outputs, expected, inputs)


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
