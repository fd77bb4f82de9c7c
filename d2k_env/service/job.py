"""One evaluation asked of a service: plain data, so that it can cross a process or a network."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from d2k_env.evaluator.protocol import Mode
from d2k_env.evaluator.sandbox import PhaseLimits

TIMED_MODES = frozenset({"benchmark", "submit", "profile"})


@dataclass(frozen=True)
class EvalJob:
    """Evaluate ``source`` (a solution.py's text) for task ``task_id`` in ``mode``.

    ``workloads`` (names; None: every workload of the backend) and ``seed`` (None: a fresh secret
    one) are :meth:`Evaluator.evaluate`'s. ``cache_dir`` is the caller's Triton cache on a service
    of the same machine; ``client`` names the caller on a remote one, which then keeps a cache per
    client (empty: a cache for this job only). ``limits``, ``time_budget_s`` and ``memcheck`` are
    the evaluator's options.
    """

    task_id: str
    source: str
    mode: Mode = "test"
    workloads: tuple[str, ...] | None = None
    seed: int | None = None
    cache_dir: str | None = None
    client: str = ""
    limits: PhaseLimits | None = None
    time_budget_s: float = 3.0
    memcheck: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise TypeError(f"EvalJob.source is a solution's text (str), not {type(self.source).__name__}")
        if self.workloads is not None:
            object.__setattr__(self, "workloads", tuple(self.workloads))

    def timed(self, backend: str) -> bool:
        """Whether it times kernels: it then needs its GPU to itself."""
        return backend == "cuda" and self.mode in TIMED_MODES

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalJob":
        d = dict(d)
        if d.get("limits") is not None:
            d["limits"] = PhaseLimits(**d["limits"])
        return cls(**d)
