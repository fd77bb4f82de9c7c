"""Evaluation services: a request in, a future of the result out.

:class:`LocalService` schedules evaluations over this machine's GPUs (or its CPUs on the
interpreter); :class:`~d2k_env.service.ray_service.RayService` (the ``ray`` extra) runs the same
lanes as Ray actors on the GPUs of a cluster. Both take an :class:`EvalJob` in ``submit`` and return a
``concurrent.futures.Future`` of an :class:`~d2k_env.evaluator.protocol.EvalResult`; an env takes
either (``gym.make(id, evaluator=...)``).
"""

from __future__ import annotations

from typing import Protocol

from d2k_env.service.job import EvalJob
from d2k_env.service.local import LocalService

__all__ = ["EvalJob", "EvaluationService", "LocalService", "make_service"]


class EvaluationService(Protocol):
    backend: str

    def submit(self, job: EvalJob, task=None): ...

    def close(self) -> None: ...


def make_service(kind: str = "local", backend: str = "auto", **options) -> EvaluationService:
    """A new service: ``local`` (:class:`LocalService`) or ``ray`` (:class:`RayService`, which needs
    the ``ray`` extra), with ``options`` passed on."""
    if kind == "local":
        return LocalService(backend, **options)
    if kind == "ray":
        from d2k_env.service.ray_service import RayService
        return RayService(backend, **options)
    raise ValueError(f"unknown evaluation service {kind!r}; expected 'local' or 'ray'")
