"""Wrong solutions generated from a task's reference, which the task's checks must score 0.

Six kinds (``WRONG_SOLUTION_KINDS``), each a small fault an honest-looking kernel has:

- ``tail_mask_dropped``: every ``mask=``/``other=`` of the reference's ``tl.load``/``tl.store``
  calls removed, so the last partial block reads and writes past the end;
- ``eps_removed``: every module-level constant named like ``EPS`` set to 0 (all-zero rows or groups
  then divide by zero);
- ``output_scaled``: the first fp32/fp64 output multiplied by 1 + 1e-3 by an extra kernel (narrower
  outputs are already rounded: the same factor would not change them);
- ``last_row_unwritten``: the first output copied by an extra kernel into a fresh tensor, all but
  its last row (index ``[-1]`` of the first dimension), which keeps what the allocation held;
- ``grid_capped``: every launch's grid capped, dimension by dimension, at the largest the reference
  launches on any smoke workload (a grid of ``min(M, constant)``): programs past the cap never run;
- ``fixed_width_block``: the first output copied into a fresh tensor for its first W columns only
  (its last dimension), W the power of two at or above that output's width on every workload, smoke
  and GPU: what one block of a hard-coded width, with no loop along the row, writes.

The last two (``HELDOUT_KINDS``) are right on every smoke workload by construction: only the
held-out shapes of a submission, which go past every workload on every axis, find them wrong. Their
constants come from a dry run of the reference's host code (its kernels replaced by recorders that
run nothing) on the workloads' inputs: real ones for the smoke workloads, on the "meta" device for
the GPU ones.

A task adapts a kind in its spec (``wrong_solutions``): literal edits to the reference first, when
its fault does not show on the smoke shapes as written, or a reason to skip it. A kind that cannot
be generated from the reference and is not skipped is an error naming the task.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch
import triton

from d2k_env.tasks.spec import WRONG_SOLUTION_KINDS, WrongSolution

SCALE = 1e-3
_REFERENCE_FORWARD = "_reference_forward"
# Kernels the wrapped kinds append; they take plain arguments, so the static policy accepts them.
_COPY_KERNELS = '''

@triton.jit
def _wrong_copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _wrong_scale(ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.load(ptr + offs, mask=offs < n) * factor, mask=offs < n)


@triton.jit
def _wrong_copy_columns(src_ptr, dst_ptr, n, width, kept, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & (offs % width < kept)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)
'''
# The grid_capped kind's launches go through it: a grid (or a grid function) capped per dimension.
_CAP_HELPER = '''

def _wrong_capped(grid, caps):
    if callable(grid):
        return lambda meta: _wrong_capped(grid(meta), caps)
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    return tuple((min(g, c) for g, c in zip(dims, caps)))
'''
_TRITON_DECORATORS = ("jit", "autotune", "heuristics")


@dataclass(frozen=True)
class Generated:
    """One kind for one task: its source, or why there is none; ``origin`` says which of generated,
    adapted (the task's edits, then generated) or skipped (the task's reason)."""

    kind: str
    origin: str
    source: str | None = None
    skipped: str = ""


class NotGenerated(Exception):
    """A kind that finds nothing to change in the reference."""


def _drop_tail_masks(source: str) -> str:
    tree = ast.parse(source)
    dropped = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store"):
            kept = [k for k in node.keywords if k.arg not in ("mask", "other")]
            dropped += len(node.keywords) - len(kept)
            node.keywords = kept
    if not dropped:
        raise NotGenerated("no tl.load or tl.store in the reference has a mask")
    return ast.unparse(tree)


def _remove_eps(source: str) -> str:
    tree = ast.parse(source)
    removed = 0
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and "EPS" in t.id.upper() for t in targets) and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float)):
            node.value = ast.Constant(0.0)
            removed += 1
    if not removed:
        raise NotGenerated("the reference has no module-level constant named like EPS")
    return ast.unparse(tree)


def _wrapped(source: str, n_outputs: int, body: list[str]) -> str:
    """The reference with its ``forward`` renamed and a new ``forward`` that runs it, then ``body``
    (which sees the outputs as the tuple ``outputs`` and returns)."""
    tree = ast.parse(source)
    forwards = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if not forwards:
        raise NotGenerated("the reference defines no module-level forward")
    forwards[0].name = _REFERENCE_FORWARD
    call = f"{_REFERENCE_FORWARD}(*inputs)"
    lines = ["", "", "def forward(*inputs):",
             f"    outputs = {call if n_outputs > 1 else f'({call},)'}", *(f"    {line}" for line in body)]
    return ast.unparse(tree) + _COPY_KERNELS + "\n".join(lines) + "\n"


def _scale_output(source: str, outputs) -> str:
    wide = [i for i, o in enumerate(outputs) if o.dtype in (torch.float32, torch.float64)]
    if not wide:
        raise NotGenerated("no fp32 or fp64 output: scaling an already rounded output by 1 + 1e-3 leaves it as it was")
    i = wide[0]
    return _wrapped(source, len(outputs), [
        f"n = outputs[{i}].numel()",
        f"_wrong_scale[(triton.cdiv(n, 1024),)](outputs[{i}], n, {1 + SCALE!r}, BLOCK=1024)",
        "return outputs" if len(outputs) > 1 else "return outputs[0]",
    ])


def _leave_last_row(source: str, outputs) -> str:
    rest = "outputs[1:]" if len(outputs) > 1 else "()"
    return _wrapped(source, len(outputs), [
        "full = outputs[0]",
        "kept = torch.empty(full.shape, dtype=full.dtype, device=full.device)",
        "n = full.numel() - full.numel() // full.shape[0]",
        "_wrong_copy[(max(1, triton.cdiv(n, 1024)),)](full, kept, n, BLOCK=1024)",
        f"return (kept,) + {rest}" if len(outputs) > 1 else "return kept",
    ])


def _kernels(tree: ast.Module) -> dict[str, list[str]]:
    """The module's Triton kernels (functions decorated with triton.jit, autotune or heuristics) and
    their parameter names."""
    def named(d):
        target = d.func if isinstance(d, ast.Call) else d
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return {n.name: [a.arg for a in n.args.args] for n in tree.body
            if isinstance(n, ast.FunctionDef) and any(named(d) in _TRITON_DECORATORS for d in n.decorator_list)}


class _Recorder:
    """Stands in for a kernel in a dry run: ``kernel[grid](*args)`` records the grid and runs nothing."""

    def __init__(self, params: list[str], grids: list[tuple]):
        self.params, self.grids = params, grids

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            shape = grid({**dict(zip(self.params, args)), **kwargs}) if callable(grid) else grid
            self.grids.append(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
        return launch


@dataclass(frozen=True)
class DryRun:
    """What the reference's host code asked for on some workloads: every launch's grid, and the
    shape of the first output on each workload (none for a task with no output)."""

    grids: list[tuple]
    first_shapes: list[tuple]


def dry_run(task, source: str, workloads, device: str) -> DryRun:
    """``source`` (the reference, perhaps edited) run on the inputs of ``workloads`` with its kernels
    replaced by recorders (:class:`_Recorder`): the outputs are allocated, never written. The inputs
    are drawn with a fixed seed on the CPU, or made on the "meta" device (no data: for GPU sizes)."""
    tree = ast.parse(source)
    kernels = _kernels(tree)
    if not kernels:
        raise NotGenerated("the reference defines no Triton kernel at module level")
    for node in tree.body:  # plain functions: the recorders replace them before anything is called
        if isinstance(node, ast.FunctionDef) and node.name in kernels:
            node.decorator_list = []
    namespace = {"__name__": f"d2k_dry_run_{task.id}", "__file__": str(task.reference_path)}
    grids: list[tuple] = []
    shapes: list[tuple] = []
    try:
        exec(compile(tree, str(task.reference_path), "exec"), namespace)  # the task's own, trusted reference
        for name, params in kernels.items():
            namespace[name] = _Recorder(params, grids)
        # Host code that asks Triton whether it interprets (to pick small tiles) hears what it would
        # hear there: yes on the CPU workloads, which run on the interpreter, no on the GPU ones.
        with triton.knobs.runtime.scope():
            triton.knobs.runtime.interpret = device == "cpu"
            for w in workloads:
                gen = torch.Generator().manual_seed(0) if device == "cpu" else None
                outputs = namespace["forward"](*task.make_inputs(w, gen, torch.device(device)))
                outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
                if outputs:  # none where the result is inputs updated in place (their grids still count)
                    shapes.append(tuple(outputs[0].shape))
    except Exception as exc:
        raise NotGenerated(f"a dry run of the reference's host code on the {device} inputs raised {exc!r}") from None
    if not grids:
        raise NotGenerated("the reference launched no kernel through kernel[grid] in a dry run")
    return DryRun(grids, shapes)


def _cap_grids(source: str, task) -> str:
    run = dry_run(task, source, task.smoke_workloads, "cpu")
    caps = tuple(max(g[i] for g in run.grids if len(g) > i) for i in range(max(map(len, run.grids))))
    tree = ast.parse(source)
    kernels = _kernels(tree)
    capped = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in kernels:
            node.slice = ast.Call(ast.Name("_wrong_capped", ast.Load()), [node.slice, ast.Constant(caps)], [])
            capped += 1
    if not capped:
        raise NotGenerated("no launch of the form kernel[grid] names a kernel of the reference")
    return ast.unparse(ast.fix_missing_locations(tree)) + _CAP_HELPER


def _fix_block_width(source: str, task) -> str:
    widths = [shape[-1] for device, ws in (("cpu", task.smoke_workloads), ("meta", task.workloads))
              for shape in dry_run(task, source, ws, device).first_shapes if shape]
    if not widths:
        raise NotGenerated("the first output has no dimension")
    kept = 1 << (max(widths) - 1).bit_length()  # the next power of two
    outputs = task.spec.outputs
    return _wrapped(source, len(outputs), [
        "full = outputs[0]",
        "kept = torch.empty(full.shape, dtype=full.dtype, device=full.device)",
        "n = full.numel()",
        f"_wrong_copy_columns[(max(1, triton.cdiv(n, 1024)),)](full, kept, n, max(1, full.shape[-1]), {kept}, "
        "BLOCK=1024)",
        "return (kept,) + outputs[1:]" if len(outputs) > 1 else "return kept",
    ])


def _apply_edits(source: str, edits, task_id: str) -> str:
    for old, new in edits:
        if old not in source:
            raise ValueError(f"task {task_id!r}: wrong_solutions edit {old!r} does not occur in the reference")
        source = source.replace(old, new)
    return source


def generate(task) -> list[Generated]:
    """Every kind of wrong solution for ``task`` (a loaded :class:`d2k_env.task.Task`), in
    ``WRONG_SOLUTION_KINDS`` order."""
    reference = task.reference_path.read_text()
    makers = {
        "tail_mask_dropped": _drop_tail_masks,
        "eps_removed": _remove_eps,
        "output_scaled": lambda src: _scale_output(src, task.spec.outputs),
        "last_row_unwritten": lambda src: _leave_last_row(src, task.spec.outputs),
        "grid_capped": lambda src: _cap_grids(src, task),
        "fixed_width_block": lambda src: _fix_block_width(src, task),
    }
    made = []
    for kind in WRONG_SOLUTION_KINDS:
        how: WrongSolution | None = task.spec.wrong_solutions.get(kind)
        if how is not None and how.skip:
            made.append(Generated(kind, "skipped", skipped=how.skip))
            continue
        source = _apply_edits(reference, how.edits, task.id) if how else reference
        try:
            made.append(Generated(kind, "adapted" if how else "generated", makers[kind](source)))
        except NotGenerated as exc:
            raise ValueError(f"task {task.id!r}: cannot generate the {kind} wrong solution ({exc}); adapt it with "
                             f"wrong_solutions={{{kind!r}: WrongSolution(edits=...)}} or skip it with a reason "
                             f"(WrongSolution(skip=...))") from None
    return made
