"""Inputs a task updates in place, checked like outputs.

Some operators' real result is a buffer they update: a recurrent state pool written back at the
slots a batch names, a KV cache a step appends to. ``TaskSpec(in_place_inputs=...)`` only lets such
an input change; nothing then says what it must hold afterwards, so a kernel that skips the write
(half the traffic of a read-update-write) would be paid. An :class:`UpdatedInput` in
``TaskSpec(updated_inputs=...)`` names the input (its index), gives it a name and dtype, and makes
its value after ``forward`` one of the *checked values*: the outputs, in order, then each updated
input. The task's ``check`` sees them all by name (``PerOutput({"state": Tolerance(...)})``), and
the "Checked:" sentence describes them all.

The expected values come from the baseline the same way: its outputs, then the same inputs as the
baseline left them (the baseline updates them in place too, as the source system does).
:func:`checked_values` builds either tuple; the evaluator calls it on the solution's outputs and
inputs after ``forward``, and on the baseline's after its call on a copy of the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch



@dataclass(frozen=True)
class UpdatedInput:
    """Input ``index`` of ``forward``, which it updates in place: checked after the call under
    ``name`` (an identifier distinct from every output's) with dtype ``dtype``."""

    index: int
    name: str
    dtype: torch.dtype

    def __post_init__(self):
        from d2k_env.tasks.spec import SpecError  # spec.py imports this module
        if not (isinstance(self.index, int) and not isinstance(self.index, bool) and self.index >= 0):
            raise SpecError("updated_inputs", "UpdatedInput(index, name, dtype) with index a non-negative int",
                            self.index)
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise SpecError("updated_inputs", "UpdatedInput(index, name, dtype) with name a Python identifier",
                            self.name)
        if not isinstance(self.dtype, torch.dtype):
            raise SpecError("updated_inputs", f"UpdatedInput({self.index}, {self.name!r}, dtype) with dtype a "
                                              f"torch.dtype", self.dtype)


def check_updated_inputs(updated: Sequence, output_names: Sequence[str]) -> None:
    """Each entry an :class:`UpdatedInput`, indices and names distinct, no name an output's."""
    from d2k_env.tasks.spec import SpecError
    if not (isinstance(updated, (list, tuple)) and all(isinstance(u, UpdatedInput) for u in updated)):
        raise SpecError("updated_inputs", "a list of UpdatedInput(index, name, dtype)", updated)
    indices = [u.index for u in updated]
    if len(set(indices)) != len(indices):
        raise SpecError("updated_inputs", "each input named once", indices)
    names = [u.name for u in updated]
    clash = sorted(set(names) & set(output_names)) or sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise SpecError("updated_inputs", "names distinct from each other and from the outputs' names", clash)


def checked_values(spec, outputs: tuple, inputs: tuple) -> tuple:
    """``outputs`` followed by each of ``spec.updated_inputs`` as ``inputs`` now hold it (a view of
    the input itself: copy it before the inputs are used again). Fails clearly on a tuple of inputs
    too short or an input of another dtype: the task's own spec is then wrong."""
    extra = []
    for u in spec.updated_inputs:
        if u.index >= len(inputs) or not isinstance(inputs[u.index], torch.Tensor):
            raise ValueError(f"updated input {u.name!r}: input {u.index} is not a tensor of forward's inputs")
        if inputs[u.index].dtype != u.dtype:
            raise ValueError(f"updated input {u.name!r}: input {u.index} has dtype {inputs[u.index].dtype}, "
                             f"the spec says {u.dtype}")
        extra.append(inputs[u.index])
    return tuple(outputs) + tuple(extra)
