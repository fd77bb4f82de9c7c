"""Task specifications: what a kernel task is, and where its files live.

A task ``<id>`` is made of four pieces, none of which live in ``d2k_env/``:

- ``tasks/<id>.py``: the declarative spec (module constants below) plus ``make_inputs``,
  ``roofline`` and optionally ``check``;
- ``baselines/<id>.py``: the PyTorch eager baseline, a module exposing ``forward(*inputs)``;
- ``references/<id>.py``: the expert Triton kernel, same contract;
- ``guidance/<id>/L1.md``, ``L2.md``, ``L3.md``: design guidance.

Spec module contract (``tasks/<id>.py``):

``TITLE``, ``FAMILY``, ``SOURCES`` (list of str), ``DESCRIPTION`` (what ``forward`` computes),
``WORKLOADS`` and ``SMOKE_WORKLOADS`` (lists of :class:`Workload`), ``OUTPUTS`` (output names),
``ALLOWED_TORCH`` (torch attributes a solution may call: allocation, views, queries),
optionally ``IN_PLACE_INPUTS`` (indices of inputs the task updates in place),
``make_inputs(workload, gen, device) -> tuple`` (``gen`` is a ``torch.Generator`` or ``None`` on
the ``meta`` device), ``roofline(workload) -> Roofline``, and optionally
``check(outputs, expected, inputs) -> CheckResult`` replacing :func:`d2k_env.evaluator.checking.allclose_check`.

Optionally, held-out shapes (THREATS class 12, shape specialisation): ``HELDOUT_SHAPES``, a
sentence stating the shape family the prompt promises, and ``heldout_workloads(rng, smoke) ->
list[Workload]``, shapes of that family drawn from ``rng`` (a ``random.Random`` seeded from the
submission's secret seed; ``smoke`` asks for sizes the CPU interpreter runs quickly). ``submit``
checks them too, untimed: a kernel that only works on the published shapes scores 0.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

GUIDANCE_LAYERS = ("L1", "L2", "L3")


def project_root() -> Path:
    """Directory holding ``tasks/``, ``baselines/``, ``references/`` and ``guidance/``.

    ``D2K_ROOT`` overrides it; otherwise the checkout this package was installed from.
    """
    env = os.environ.get("D2K_ROOT")
    return Path(env).resolve() if env else Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Workload:
    """One problem size of a task. ``params`` are passed to ``make_inputs`` and ``roofline``.

    ``launch_bound`` marks sizes whose time is dominated by launch latency rather than bytes;
    such workloads also get a CUDA-graph timing and are judged against launch latency.
    """

    name: str
    params: dict[str, Any]
    launch_bound: bool = False
    heldout: bool = False  # drawn from the secret seed on submit; checked, never timed

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass(frozen=True)
class Roofline:
    """Minimum bytes moved through HBM and floating-point operations for one call."""

    bytes: float
    flops: float = 0.0

    def floor_ms(self, bandwidth_gbs: float, tflops: float) -> float:
        """The roofline floor given measured ceilings (GB/s and TFLOP/s)."""
        t_mem = self.bytes / (bandwidth_gbs * 1e9)
        t_comp = self.flops / (tflops * 1e12) if tflops > 0 else 0.0
        return max(t_mem, t_comp) * 1e3


@dataclass(frozen=True)
class CheckResult:
    """Verdict of comparing a solution's outputs with the expected ones."""

    ok: bool
    message: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0


@dataclass
class Task:
    """A loaded task: its spec module plus the paths of its other pieces."""

    id: str
    spec: ModuleType
    root: Path
    workloads: list[Workload] = field(default_factory=list)
    smoke_workloads: list[Workload] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.spec.TITLE

    @property
    def family(self) -> str:
        return self.spec.FAMILY

    @property
    def description(self) -> str:
        return self.spec.DESCRIPTION.strip()

    @property
    def sources(self) -> list[str]:
        return list(self.spec.SOURCES)

    @property
    def outputs(self) -> list[str]:
        return list(self.spec.OUTPUTS)

    @property
    def allowed_torch(self) -> frozenset[str]:
        return frozenset(self.spec.ALLOWED_TORCH)

    @property
    def in_place_inputs(self) -> frozenset[int]:
        return frozenset(getattr(self.spec, "IN_PLACE_INPUTS", ()))

    @property
    def spec_path(self) -> Path:
        return self.root / "tasks" / f"{self.id}.py"

    @property
    def baseline_path(self) -> Path:
        return self.root / "baselines" / f"{self.id}.py"

    @property
    def reference_path(self) -> Path:
        return self.root / "references" / f"{self.id}.py"

    def guidance_path(self, layer: str) -> Path:
        return self.root / "guidance" / self.id / f"{layer}.md"

    def guidance(self, layer: str) -> str:
        if layer not in GUIDANCE_LAYERS:
            raise ValueError(f"unknown guidance layer {layer!r}; expected one of {GUIDANCE_LAYERS}")
        return self.guidance_path(layer).read_text().strip()

    def workload(self, name: str, smoke: bool = False) -> Workload:
        pool = self.smoke_workloads if smoke else self.workloads
        for w in pool:
            if w.name == name:
                return w
        names = ", ".join(w.name for w in pool)
        raise KeyError(f"task {self.id!r} has no workload {name!r}; workloads: {names}")

    @property
    def heldout_shapes(self) -> str | None:
        return getattr(self.spec, "HELDOUT_SHAPES", None)

    def heldout_workloads(self, seed: int, smoke: bool) -> list[Workload]:
        """The task's held-out shapes for a submission with secret ``seed`` (none if it has none)."""
        draw = getattr(self.spec, "heldout_workloads", None)
        if draw is None:
            return []
        drawn = draw(random.Random(seed), smoke)
        return [Workload(f"held-out {w.name}", dict(w.params), heldout=True) for w in drawn]

    def make_inputs(self, workload: Workload, gen: Any, device: Any) -> tuple:
        return tuple(self.spec.make_inputs(workload, gen, device))

    def roofline(self, workload: Workload) -> Roofline:
        return self.spec.roofline(workload)

    @property
    def checker(self) -> Callable | None:
        return getattr(self.spec, "check", None)


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_REQUIRED = ("TITLE", "FAMILY", "SOURCES", "DESCRIPTION", "WORKLOADS", "SMOKE_WORKLOADS", "OUTPUTS",
             "ALLOWED_TORCH", "make_inputs", "roofline")


@functools.lru_cache(maxsize=None)
def load_task(task_id: str, root: str | None = None) -> Task:
    """Load ``tasks/<task_id>.py`` and check that every piece of the task exists.

    ``task_id`` must be one of :func:`task_ids`: an id is a name, never a path, so no file outside
    ``tasks/`` is ever executed as a spec (``../x`` or ``/tmp/x`` would be, joined to the directory).
    """
    base = Path(root) if root else project_root()
    known = task_ids(str(base))
    if task_id not in known:
        raise KeyError(f"unknown task {task_id!r} (known: {', '.join(known) or 'none'})")
    path = base / "tasks" / f"{task_id}.py"
    spec = _load_module(path, f"d2k_tasks.{task_id}")
    missing = [attr for attr in _REQUIRED if not hasattr(spec, attr)]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    task = Task(task_id, spec, base, list(spec.WORKLOADS), list(spec.SMOKE_WORKLOADS))
    for p in (task.baseline_path, task.reference_path, *(task.guidance_path(l) for l in GUIDANCE_LAYERS)):
        if not p.is_file():
            raise FileNotFoundError(f"task {task_id!r} is missing {p.relative_to(base)}")
    return task


def task_ids(root: str | None = None) -> list[str]:
    """Ids of every task under ``tasks/``, sorted."""
    base = Path(root) if root else project_root()
    return sorted(p.stem for p in (base / "tasks").glob("*.py") if not p.name.startswith("_"))
