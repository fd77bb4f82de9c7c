"""The evaluator: compiles, checks and times solution files, always in a child process.

Backends: ``cuda`` (the task's GPU workloads, timed), ``interpreter`` (Triton's CPU interpreter on
the task's smoke workloads; correctness only) and ``auto`` (``cuda`` when a GPU is visible).
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path

from d2k_env.evaluator.protocol import EvalRequest, EvalResult, Mode, WorkloadResult
from d2k_env.evaluator.sandbox import run_worker
from d2k_env.task import Task

BACKENDS = ("auto", "cuda", "interpreter")

__all__ = ["BACKENDS", "EvalResult", "Evaluator", "WorkloadResult", "resolve_backend"]


def resolve_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if backend == "auto":
        import torch
        return "cuda" if torch.cuda.is_available() else "interpreter"
    return backend


class Evaluator:
    """Evaluates solution files for one task on one backend.

    ``cache_dir`` holds the Triton cache, so unchanged kernels are not recompiled between
    evaluations; ceilings (copy bandwidth, GEMM rate) measured by the first timed evaluation are
    reused by later ones.
    """

    def __init__(self, task: Task, backend: str = "auto", cache_dir: str | Path | None = None,
                 check_timeout_s: float = 300.0, timed_timeout_s: float = 900.0, time_budget_s: float = 3.0):
        self.task = task
        self.backend = resolve_backend(backend)
        self._own_cache = None if cache_dir else tempfile.TemporaryDirectory(prefix="d2k-triton-")
        self.cache_dir = Path(cache_dir or self._own_cache.name)
        self.check_timeout_s, self.timed_timeout_s = check_timeout_s, timed_timeout_s
        self.time_budget_s = time_budget_s
        self.ceilings: dict[str, float] | None = None

    @property
    def can_time(self) -> bool:
        return self.backend == "cuda"

    @property
    def workloads(self):
        """The workloads this backend evaluates: the GPU ones, or the small smoke ones."""
        return self.task.workloads if self.can_time else self.task.smoke_workloads

    def evaluate(self, solution_path: str | Path, mode: Mode = "test", workloads: list[str] | None = None,
                 seed: int | None = None) -> EvalResult:
        """Evaluate ``solution_path``. ``seed`` defaults to a fresh secret one."""
        names = workloads or [w.name for w in self.workloads]
        if mode == "profile" and not self.can_time:
            return EvalResult(mode, self.backend, error="profiling needs a GPU: the interpreter backend "
                                                        "runs kernels on the CPU and cannot time them")
        req = EvalRequest(task_id=self.task.id, root=str(self.task.root), solution_path=str(solution_path),
                          mode=mode, device="cuda" if self.can_time else "cpu", workloads=names,
                          smoke=not self.can_time, seed=secrets.randbits(63) if seed is None else seed,
                          time_budget_s=self.time_budget_s, ceilings=self.ceilings)
        timed = mode in ("benchmark", "submit", "profile") and self.can_time
        timeout = self.timed_timeout_s if timed else self.check_timeout_s
        outcome = run_worker(req, timeout_s=timeout, triton_cache=self.cache_dir,
                             interpret=not self.can_time)
        if outcome.result is None:
            if outcome.timed_out:
                why = f"evaluation timed out after {timeout:.0f} s (a hang, or far too slow); it was killed"
            else:
                why = f"the evaluation process died (exit status {outcome.returncode}) before reporting"
            result = EvalResult(mode, self.backend, error=why)
        else:
            result = EvalResult.from_dict(outcome.result)
            if result.ceilings and self.ceilings is None:
                self.ceilings = result.ceilings
        result.output = outcome.output
        return result

    def close(self) -> None:
        if self._own_cache is not None:
            self._own_cache.cleanup()
