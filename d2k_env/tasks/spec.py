"""The task spec: one typed record per task, validated when it is built.

A spec file ``tasks/<id>.py`` binds ``TASK = TaskSpec(...)``. Every field is checked as the record
is made; a wrong one raises :class:`SpecError` naming the field and what was expected, and the
loader adds the file's path.
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

from d2k_env.task import Roofline, Workload
from d2k_env.tasks.checks import Check, PerOutput
from d2k_env.tasks.in_place import UpdatedInput, check_updated_inputs
from d2k_env.tasks.properties import DesignProperty, check_properties

# The wrong solutions generated from every task's reference (d2k_env.tasks.wrong_solutions).
WRONG_SOLUTION_KINDS = ("tail_mask_dropped", "eps_removed", "output_scaled", "last_row_unwritten", "grid_capped",
                        "fixed_width_block")
# The kinds right on every smoke workload by construction: only the held-out shapes of a submission
# can find them wrong.
HELDOUT_KINDS = ("grid_capped", "fixed_width_block")
# The secret seeds a spec's held-out draw is tried with when the spec is built (each draw must cover
# every axis; see Heldout). Drawing is cheap: no tensor is made.
HELDOUT_CHECK_SEEDS = range(64)


class SpecError(ValueError):
    """A field of a task spec that is not what it must be."""

    def __init__(self, field_name: str, expected: str, got: Any):
        shown = repr(got)
        super().__init__(f"field {field_name!r}: expected {expected}; got {shown[:120]}"
                         f"{'...' if len(shown) > 120 else ''}")
        self.field = field_name


@dataclass(frozen=True)
class Output:
    """One output of ``forward``, in order: its name and dtype."""

    name: str
    dtype: torch.dtype

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise SpecError("outputs", "Output(name, dtype) with name a Python identifier", self.name)
        if not isinstance(self.dtype, torch.dtype):
            raise SpecError("outputs", f"Output({self.name!r}, dtype) with dtype a torch.dtype", self.dtype)


@dataclass(frozen=True)
class Heldout:
    """Held-out shapes (shape specialisation): ``shapes``, the family in one sentence the prompt
    promises, and ``draw(rng, smoke) -> list[Workload]``, shapes of it drawn from ``rng`` (a
    ``random.Random`` seeded from the submission's secret seed; ``smoke`` asks for sizes the CPU
    interpreter runs quickly). ``submit`` checks them, untimed.

    A draw must cover the family past what the backend shows: on every axis (every numeric param of
    the workloads), at least one drawn shape exceeds the largest workload of that backend (the smoke
    workloads on the interpreter, the GPU workloads on the GPU); a kernel right only up to the shapes
    it was shown then fails. The spec checks this when it is built, on the draws of
    ``HELDOUT_CHECK_SEEDS``. ``fixed`` names the axes the family does not vary (a group size, say),
    which no shape can exceed. Keep a shape long on one axis narrow on the others: the interpreter
    pays per program."""

    shapes: str
    draw: Callable[[random.Random, bool], list[Workload]]
    fixed: Sequence[str] = ()

    def __post_init__(self):
        if not (isinstance(self.shapes, str) and self.shapes.strip()):
            raise SpecError("heldout", "Heldout(shapes, draw) with shapes a sentence", self.shapes)
        _check_callable("heldout", self.draw, 2, "draw(rng, smoke)")
        _check_strings("heldout", self.fixed, non_empty=False)


@dataclass(frozen=True)
class WrongSolution:
    """How a task adapts one kind of generated wrong solution (see ``WRONG_SOLUTION_KINDS``):
    ``edits``, literal ``(old, new)`` replacements made in the reference before the kind's own
    change (each ``old`` must occur), so that its fault shows on the smoke shapes; or ``skip``, why
    the kind does not apply to the task."""

    edits: tuple[tuple[str, str], ...] = ()
    skip: str = ""

    def __post_init__(self):
        if bool(self.edits) == bool(self.skip):
            raise SpecError("wrong_solutions", "WrongSolution(edits=...) or WrongSolution(skip='why')", self)
        if not all(isinstance(e, tuple) and len(e) == 2 and all(isinstance(s, str) for s in e) for e in self.edits):
            raise SpecError("wrong_solutions", "edits as (old, new) pairs of strings", self.edits)


def _check_callable(name: str, fn: Any, arity: int, shape: str) -> None:
    if not callable(fn):
        raise SpecError(name, f"a function {shape}", fn)
    try:
        inspect.signature(fn).bind(*range(arity))
    except TypeError:
        raise SpecError(name, f"a function {shape} (it must take {arity} positional arguments)", fn) from None
    except ValueError:  # builtins without a signature: accepted as they are
        pass


def _check_strings(name: str, value: Any, non_empty: bool) -> None:
    if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value)):
        raise SpecError(name, "a list of non-empty strings", value)
    if non_empty and not value:
        raise SpecError(name, "a non-empty list of strings", value)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)  # a flag is no size


def _axes(workloads: Sequence[Workload]) -> list[str]:
    """The params every workload has as a number: the axes of the shape family."""
    return [k for k in workloads[0].params if all(k in w.params and _numeric(w.params[k]) for w in workloads)]


def _check_heldout_coverage(heldout: Heldout, workloads: Sequence[Workload], smoke_workloads: Sequence[Workload]) -> None:
    """Every draw of ``HELDOUT_CHECK_SEEDS``, on each backend, is a non-empty list of workloads of the
    family that goes past that backend's largest workload on every axis but ``heldout.fixed``."""
    for smoke, published in ((True, smoke_workloads), (False, workloads)):
        backend = "interpreter (smoke=True)" if smoke else "GPU (smoke=False)"
        axes = _axes(published)
        unknown = sorted(set(heldout.fixed) - set(axes))
        if unknown:
            raise SpecError("heldout", f"fixed naming axes of the workloads ({', '.join(axes)})", unknown)
        largest = {a: max(w.params[a] for w in published) for a in axes if a not in heldout.fixed}
        for seed in HELDOUT_CHECK_SEEDS:
            try:
                drawn = heldout.draw(random.Random(seed), smoke)
            except Exception as exc:  # the author's code: any failure is the spec's
                raise SpecError("heldout", "draw(rng, smoke) returning shapes", f"the {backend} draw of seed {seed} "
                                                                                 f"raised {exc!r}") from None
            if not (isinstance(drawn, (list, tuple)) and drawn and all(isinstance(w, Workload) for w in drawn)):
                raise SpecError("heldout", f"draw(rng, smoke) returning a non-empty list of Workload "
                                           f"(the {backend} draw of seed {seed})", drawn)
            for w in drawn:
                if not all(k in w.params for k in axes):
                    raise SpecError("heldout", f"held-out shapes with every param of the workloads ({', '.join(axes)})",
                                    w)
            reach = {a: max((w.params[a] for w in drawn if _numeric(w.params[a])), default=None) for a in largest}
            short = [a for a, most in largest.items() if reach[a] is None or reach[a] <= most]
            if short:
                raise SpecError(
                    "heldout", "a draw with, on every axis, a shape past the backend's largest workload (axes the "
                               "family holds fixed go in Heldout(fixed=...))",
                    f"the {backend} draw of seed {seed}: " + "; ".join(
                        f"{a} at most {reach[a]}, the {'smoke ' if smoke else ''}workloads' largest {largest[a]}"
                        for a in short))


def _check_workloads(name: str, value: Any) -> None:
    if not (isinstance(value, (list, tuple)) and value and all(isinstance(w, Workload) for w in value)):
        raise SpecError(name, "a non-empty list of Workload(name, params)", value)
    names = [w.name for w in value]
    if len(set(names)) != len(names):
        raise SpecError(name, "workloads with distinct names", names)


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task declares; docs/adding-a-task.md has a table of the fields."""

    title: str
    family: str
    sources: Sequence[str]
    description: str
    outputs: Sequence[Output]
    workloads: Sequence[Workload]
    smoke_workloads: Sequence[Workload]
    allowed_torch: Sequence[str]
    make_inputs: Callable[[Workload, Any, Any], tuple]
    roofline: Callable[[Workload], Roofline]
    heldout: Heldout
    check: Check = field(default_factory=PerOutput)
    in_place_inputs: Sequence[int] = ()
    # Bytes forward may allocate on a workload (None: unbounded), for tasks whose point is bounded
    # memory (a fused loss must not hold the full logits): the replay sums the recorded buffers.
    allocation_limit: Callable[[Workload], int] | None = None
    updated_inputs: Sequence[UpdatedInput] = ()
    wrong_solutions: Mapping[str, WrongSolution] = field(default_factory=dict)
    # What a solution should realise beyond being right, per guidance layer (d2k_env.tasks.properties).
    design_properties: Sequence[DesignProperty] = ()

    def __post_init__(self):
        for name in ("title", "family", "description"):
            if not (isinstance(getattr(self, name), str) and getattr(self, name).strip()):
                raise SpecError(name, "a non-empty string", getattr(self, name))
        if "Checked:" in self.description:
            raise SpecError("description", "no 'Checked:' sentence (it is generated from check)", self.description)
        _check_strings("sources", self.sources, non_empty=True)
        _check_strings("allowed_torch", self.allowed_torch, non_empty=False)
        # No output at all only where forward's result is the inputs it updates (RoPE on q and k).
        if not (isinstance(self.outputs, (list, tuple)) and (self.outputs or self.updated_inputs)
                and all(isinstance(o, Output) for o in self.outputs)):
            raise SpecError("outputs", "a non-empty list of Output(name, dtype) (empty only where updated_inputs "
                                       "names the result)", self.outputs)
        if len({o.name for o in self.outputs}) != len(self.outputs):
            raise SpecError("outputs", "outputs with distinct names", [o.name for o in self.outputs])
        _check_workloads("workloads", self.workloads)
        _check_workloads("smoke_workloads", self.smoke_workloads)
        _check_callable("make_inputs", self.make_inputs, 3, "make_inputs(workload, gen, device) -> tuple")
        _check_callable("roofline", self.roofline, 1, "roofline(workload) -> Roofline")
        if self.allocation_limit is not None:
            _check_callable("allocation_limit", self.allocation_limit, 1, "allocation_limit(workload) -> bytes")
        if not isinstance(self.heldout, Heldout):
            raise SpecError("heldout", "Heldout(shapes, draw)", self.heldout)
        _check_heldout_coverage(self.heldout, self.workloads, self.smoke_workloads)
        if not isinstance(self.check, Check):
            raise SpecError("check", "a d2k_env.tasks checker (PerOutput(...) or a Check)", self.check)
        if not all(isinstance(i, int) and i >= 0 for i in self.in_place_inputs):
            raise SpecError("in_place_inputs", "indices of inputs (non-negative ints)", self.in_place_inputs)
        check_updated_inputs(self.updated_inputs, [o.name for o in self.outputs])
        unlisted = sorted({u.index for u in self.updated_inputs} - set(self.in_place_inputs))
        if unlisted:
            raise SpecError("updated_inputs", "inputs listed in in_place_inputs too", unlisted)
        check_properties(self.design_properties, SpecError)
        problem = self.check.problem(self.checked_outputs)
        if problem:
            raise SpecError("check", f"a checker of these outputs ({problem})", self.check)
        for kind, how in dict(self.wrong_solutions).items():
            if kind not in WRONG_SOLUTION_KINDS:
                raise SpecError("wrong_solutions", f"keys among {', '.join(WRONG_SOLUTION_KINDS)}", kind)
            if not isinstance(how, WrongSolution):
                raise SpecError("wrong_solutions", "WrongSolution(edits=...) or WrongSolution(skip='why')", how)

    @property
    def checked_outputs(self) -> list[Output]:
        """What the checker compares: the outputs, then each updated input (d2k_env.tasks.in_place)."""
        return list(self.outputs) + [Output(u.name, u.dtype) for u in self.updated_inputs]

    @property
    def checked(self) -> str:
        """The description's generated "Checked:" sentence."""
        text = "Checked: " + self.check.describe(self.checked_outputs)
        if self.updated_inputs:
            text += " " + "; ".join(f"{u.name} is input {u.index} as forward leaves it (updated in place)"
                                    for u in self.updated_inputs) + "."
        return text
