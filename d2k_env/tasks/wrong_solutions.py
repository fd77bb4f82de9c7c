"""Wrong solutions generated from a task's reference, which the task's checks must score 0.

Four kinds (``WRONG_SOLUTION_KINDS``), each a small fault an honest-looking kernel has:

- ``tail_mask_dropped``: every ``mask=``/``other=`` of the reference's ``tl.load``/``tl.store``
  calls removed, so the last partial block reads and writes past the end;
- ``eps_removed``: every module-level constant named like ``EPS`` set to 0 (all-zero rows or groups
  then divide by zero);
- ``output_scaled``: the first fp32/fp64 output multiplied by 1 + 1e-3 by an extra kernel (narrower
  outputs are already rounded: the same factor would not change them);
- ``last_row_unwritten``: the first output copied by an extra kernel into a fresh tensor, all but
  its last row (index ``[-1]`` of the first dimension), which keeps what the allocation held.

A task adapts a kind in its spec (``wrong_solutions``): literal edits to the reference first, when
its fault does not show on the smoke shapes as written, or a reason to skip it. A kind that cannot
be generated from the reference and is not skipped is an error naming the task.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch

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
'''


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
