"""Task specifications: what a kernel task is, and where its files live.

A task ``<id>`` is made of four pieces, found under a *task directory* holding the four folders
``tasks/``, ``baselines/``, ``references/`` and ``guidance/``:

- ``tasks/<id>.py``: the spec, ``TASK = TaskSpec(...)``;
- ``baselines/<id>.py``: the PyTorch eager baseline, a module exposing ``forward(*inputs)``;
- ``references/<id>.py``: the expert Triton kernel, same contract;
- ``guidance/<id>/L1.md``, ``L2.md``, ``L3.md``: design guidance.

The spec file binds ``TASK``, a :class:`d2k_env.tasks.TaskSpec` (the task-author API: typed
fields, each validated as the spec is built; docs/adding-a-task.md has a table of them).
A spec that fails to load raises ``ValueError`` naming the file, the field and what was expected.

Task directories: the shipped tasks (the repository's top-level folders in a checkout; a wheel
carries them inside the package, under ``d2k_env/builtin/``), then each directory named in
``D2K_TASKS_PATH`` (``os.pathsep``-separated). Finding the tasks reads file names only: no spec
is executed, so torch is not imported until a task is loaded.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

GUIDANCE_LAYERS = ("L1", "L2", "L3")


TASK_FOLDERS = ("tasks", "baselines", "references", "guidance")
TASKS_PATH_VAR = "D2K_TASKS_PATH"
# Where a wheel puts the shipped task directory (pyproject.toml maps the top-level folders there).
_PACKAGED_TASKS = Path(__file__).resolve().parent / "builtin"


def project_root() -> Path:
    """The directory this package lies in: a checkout (with ``tests/``, ``benchmarks/`` and the
    shipped tasks), or ``site-packages`` when installed from a wheel."""
    return Path(__file__).resolve().parent.parent


def builtin_root() -> Path:
    """The task directory of the shipped tasks: inside the package when installed from a wheel,
    else the checkout's top-level folders (an editable install or a plain checkout)."""
    return _PACKAGED_TASKS if (_PACKAGED_TASKS / "tasks").is_dir() else project_root()


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
    """A loaded task: its spec plus the paths of its other pieces."""

    id: str
    spec: Any  # d2k_env.tasks.TaskSpec (imported when a task is loaded, with torch)
    root: Path
    workloads: list[Workload] = field(default_factory=list)
    smoke_workloads: list[Workload] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def description(self) -> str:
        """What forward computes, then the "Checked:" sentence generated from the task's checker."""
        return self.spec.description.strip() + "\n" + self.spec.checked

    @property
    def sources(self) -> list[str]:
        return list(self.spec.sources)

    @property
    def outputs(self) -> list[str]:
        return [o.name for o in self.spec.outputs]

    @property
    def checked_outputs(self) -> list[str]:
        """The names of the values checked: the outputs, then the inputs updated in place."""
        return [o.name for o in self.spec.checked_outputs]

    def checked_values(self, outputs: tuple, inputs: tuple) -> tuple:
        """``outputs`` then each updated input as ``inputs`` hold it now (see d2k_env.tasks.in_place)."""
        from d2k_env.tasks.in_place import checked_values
        return checked_values(self.spec, outputs, inputs)

    @property
    def allowed_torch(self) -> frozenset[str]:
        return frozenset(self.spec.allowed_torch)

    @property
    def in_place_inputs(self) -> frozenset[int]:
        return frozenset(self.spec.in_place_inputs)

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
    def heldout_shapes(self) -> str:
        return self.spec.heldout.shapes

    def heldout_workloads(self, seed: int, smoke: bool) -> list[Workload]:
        """The task's held-out shapes for a submission with secret ``seed``."""
        drawn = self.spec.heldout.draw(random.Random(seed), smoke)
        return [Workload(f"held-out {w.name}", dict(w.params), heldout=True) for w in drawn]

    def make_inputs(self, workload: Workload, gen: Any, device: Any) -> tuple:
        return tuple(self.spec.make_inputs(workload, gen, device))

    def roofline(self, workload: Workload) -> Roofline:
        return self.spec.roofline(workload)

    def checker(self, outputs: tuple, expected: tuple, inputs: tuple) -> CheckResult:
        """The task's checker on the checked values in the task's order (their structure already checked)."""
        names = self.checked_outputs
        return self.spec.check.verdict(dict(zip(names, outputs)), dict(zip(names, expected)), inputs)


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_task(task_id: str, root: str | Path | None = None) -> Task:
    """Load ``tasks/<task_id>.py`` and check that every piece of the task exists.

    Without ``root``, the task is looked up among every task directory (:func:`task_roots`).
    ``task_id`` must be one of the ids found: an id is a name, never a path, so no file outside a
    ``tasks/`` folder is ever executed as a spec (``../x`` or ``/tmp/x`` would be, joined to it).
    """
    if root is None:
        roots = task_roots()
        if task_id not in roots:
            raise KeyError(f"unknown task {task_id!r} (known: {', '.join(sorted(roots)) or 'none'})")
        root = roots[task_id]
    return _load_task(task_id, str(root))


@functools.lru_cache(maxsize=None)
def _load_task(task_id: str, root: str) -> Task:
    base = Path(root)
    known = task_ids(base)
    if task_id not in known:
        raise KeyError(f"unknown task {task_id!r} in {base} (known: {', '.join(known) or 'none'})")
    return _task_from_spec(task_id, base)


def load_snapshot(task_id: str, root: str) -> Task:
    """The task of an evaluation's private snapshot, which holds its spec and baseline only (no
    worker sees the reference or the guidance). Trusted: the evaluator made it from a loaded task."""
    return _task_from_spec(task_id, Path(root))


def _task_from_spec(task_id: str, base: Path) -> Task:
    from d2k_env.tasks import SpecError, TaskSpec  # loads torch: only once a task is loaded

    path = base / "tasks" / f"{task_id}.py"
    try:
        module = _load_module(path, f"d2k_tasks.{task_id}")
    except SpecError as exc:
        raise ValueError(f"{path}: {exc}") from None
    spec = getattr(module, "TASK", None)
    if not isinstance(spec, TaskSpec):
        raise ValueError(f"{path}: expected TASK = d2k_env.tasks.TaskSpec(...); got {type(spec).__name__} "
                         f"(see docs/adding-a-task.md, or d2k new-task)")
    return Task(task_id, spec, base, list(spec.workloads), list(spec.smoke_workloads))


def _task_files(base: Path, task_id: str) -> list[Path]:
    """Every file task ``task_id`` needs under task directory ``base``."""
    return [base / "tasks" / f"{task_id}.py", base / "baselines" / f"{task_id}.py",
            base / "references" / f"{task_id}.py", *(base / "guidance" / task_id / f"{layer}.md"
                                                      for layer in GUIDANCE_LAYERS)]


def scan_task_dir(base: Path) -> tuple[list[str], list[str]]:
    """The complete tasks of task directory ``base``, and a message per problem found (naming the
    path): no such directory, no ``tasks/`` folder, an id that is no identifier, a missing piece."""
    if not base.is_dir():
        return [], [f"{base} is not a directory"]
    if not (base / "tasks").is_dir():
        return [], [f"{base} has no tasks/ folder (a task directory holds {', '.join(f + '/' for f in TASK_FOLDERS)})"]
    ids, problems = [], []
    for spec in sorted((base / "tasks").glob("*.py")):
        task_id = spec.stem
        if task_id.startswith("_"):
            continue
        if not task_id.isidentifier():
            problems.append(f"{spec}: a task id must be a Python identifier; skipped")
            continue
        missing = [str(p.relative_to(base)) for p in _task_files(base, task_id) if not p.is_file()]
        if missing:
            problems.append(f"task {task_id!r} in {base} lacks {', '.join(missing)}; skipped")
            continue
        ids.append(task_id)
    return ids, problems


def task_dirs() -> list[Path]:
    """The task directories searched, in order: the shipped tasks, then ``D2K_TASKS_PATH``'s
    (each once: naming the shipped one again adds nothing)."""
    dirs = [builtin_root()]
    for entry in os.environ.get(TASKS_PATH_VAR, "").split(os.pathsep):
        if entry and Path(entry).resolve() not in dirs:
            dirs.append(Path(entry).resolve())
    return dirs


def discover() -> tuple[dict[str, Path], list[str]]:
    """Every task id mapped to its task directory, and the problems met finding them, each naming
    its path. An id that an earlier directory already defines is skipped: a user's task directory
    cannot replace a shipped task."""
    roots: dict[str, Path] = {}
    problems: list[str] = []
    for i, base in enumerate(task_dirs()):
        ids, found = scan_task_dir(base)
        problems += [f"{TASKS_PATH_VAR}: {p}" if i else p for p in found]
        for task_id in ids:
            if task_id in roots:
                problems.append(f"{TASKS_PATH_VAR}: task {task_id!r} in {base} is already defined in "
                                f"{roots[task_id]}; skipped")
            else:
                roots[task_id] = base
    return roots, problems


def task_roots(warn: bool = False) -> dict[str, Path]:
    """Every task id mapped to its task directory; ``warn`` turns each problem into a warning."""
    roots, problems = discover()
    if warn:
        for problem in problems:
            warnings.warn(f"d2k-env: {problem}", RuntimeWarning, stacklevel=3)
    return roots


def task_ids(root: str | Path | None = None) -> list[str]:
    """Ids of every task, sorted: of every task directory, or only of task directory ``root``."""
    return sorted(scan_task_dir(Path(root))[0] if root is not None else task_roots())
