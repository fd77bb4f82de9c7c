"""The Ray evaluation service: the local service's lanes as Ray actors, one per GPU of a cluster.

Envs on CPU nodes, or inside a trainer, send their evaluations to actors on the GPU nodes. Each
actor runs a :class:`~d2k_env.service.LocalService` over the GPU Ray gave it (Ray sets the actor's
``CUDA_VISIBLE_DEVICES``), so an actor's jobs are scheduled, leased and sandboxed exactly as on one
machine. Needs the ``ray`` extra (``pip install "d2k-env[ray]"``); tasks are loaded by id on the
actors' nodes, so the tasks of ``D2K_TASKS_PATH`` must exist there too.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from concurrent.futures import Future
from typing import Any

from d2k_env.evaluator.protocol import EvalResult
from d2k_env.service.bridge import BridgeServer
from d2k_env.service.job import EvalJob

try:
    import ray
    from ray.exceptions import RayActorError, RayError
except ImportError as exc:  # pragma: no cover - raised at use, with the way out
    raise ImportError('the Ray evaluation service needs Ray: pip install "d2k-env[ray]"') from exc


@ray.remote
class EvalActor:
    """One lane set on one GPU (or, on the interpreter, ``jobs`` CPU lanes) of the cluster."""

    def __init__(self, backend: str, lanes_per_gpu: int, jobs: int, spares: bool):
        from d2k_env.service.local import LocalService
        self.service = LocalService(backend, lanes_per_gpu=lanes_per_gpu, jobs=jobs, spares=spares)
        self.node = ray.get_runtime_context().get_node_id()

    def evaluate(self, job: dict[str, Any]) -> dict[str, Any]:
        result = self.service.evaluate(EvalJob.from_dict(job))
        result.queue["node"] = self.node
        return result.to_dict()

    def stats(self) -> dict:
        return {**self.service.stats(), "node": self.node}

    def pid(self) -> int:
        import os
        return os.getpid()


class RayService:
    """Evaluations on a Ray cluster: :meth:`submit` takes an :class:`EvalJob` and returns a future of
    its :class:`EvalResult`, sent to the actor with the fewest jobs outstanding.

    ``backend``: ``cuda`` (one actor per GPU, ``num_gpus=1`` each; ``actors`` defaults to the
    cluster's GPU count), ``interpreter`` (``actors`` CPU actors of ``jobs`` lanes each; default: one
    actor per two CPUs of the cluster) or ``auto`` (``cuda`` when the cluster has a GPU). Connects
    with ``ray.init(address=address)`` unless Ray is initialised already. An actor that dies (its
    process or its node lost) is restarted by Ray; the jobs it held come back as results whose
    ``error`` says so, never as exceptions, and the next jobs go to the restarted actor.

    Other processes: the object pickles (into a spawned process of an async vector env, a Ray task,
    another machine) as the names of the same actors (namespace ``d2k_env``), which the copy looks
    up after connecting to the cluster (``ray.init(address=... or "auto")``). A forked copy cannot
    use Ray (a Ray driver does not survive a fork): it sends its jobs to the process that made the
    service, through :mod:`d2k_env.service.bridge`. Only the service that made the actors ends
    them in :meth:`close`.
    """

    NAMESPACE = "d2k_env"

    def __init__(self, backend: str = "auto", actors: int | None = None, address: str | None = None,
                 lanes_per_gpu: int = 2, jobs: int = 1, spares: bool = True):
        if not ray.is_initialized():
            ray.init(address=address)
        self.address = address
        resources = ray.cluster_resources()
        if backend == "auto":
            backend = "cuda" if resources.get("GPU", 0) >= 1 else "interpreter"
        if backend not in ("cuda", "interpreter"):
            raise ValueError(f"unknown backend {backend!r}; expected 'auto', 'cuda' or 'interpreter'")
        self.backend = backend
        if actors is None:
            actors = int(resources.get("GPU", 0)) if backend == "cuda" else max(1, int(resources.get("CPU", 1)) // 2)
        if actors < 1:
            raise ValueError(f"the {backend} backend needs at least one actor; the cluster offers {resources}")
        per_actor = {"num_gpus": 1} if backend == "cuda" else {"num_cpus": jobs}
        # Named, so that a copy in another Ray driver (a spawned process) finds them: handles do not
        # unpickle outside a connected driver.
        prefix = f"d2k-eval-{secrets.token_hex(8)}"
        self._names = [f"{prefix}-{i}" for i in range(actors)]
        self._actors = [EvalActor.options(max_restarts=-1, max_concurrency=4 * max(lanes_per_gpu, jobs),
                                          name=name, namespace=self.NAMESPACE, **per_actor)
                        .remote(backend, lanes_per_gpu, jobs, spares) for name in self._names]
        self._outstanding = [0] * actors
        self._lock = threading.Lock()
        self._suspect: set[int] = set()  # actors that lost a job: pinged until they answer before the next
        self._owner = True
        self._pid = os.getpid()
        self._bridge: BridgeServer | None = BridgeServer(self.submit, self.backend)

    def submit(self, job: EvalJob, task=None) -> Future:
        """Send ``job`` (its ``cache_dir`` stays here: the actor keeps a cache per ``client``)."""
        if os.getpid() != self._pid:  # a forked copy: Ray stayed with the process that made the copy
            if self._bridge is None:
                raise RuntimeError("this RayService was forked from a process that did not make it: hand it to "
                                   "the process by pickling (a spawned async vector env), not by fork")
            return self._bridge.client().submit(job)
        if not isinstance(job, EvalJob):
            raise TypeError(f"submit takes an EvalJob, not {type(job).__name__}")
        with self._lock:
            index = min(range(len(self._actors)), key=lambda i: (self._outstanding[i], i))
            self._outstanding[index] += 1
        payload = {**job.to_dict(), "cache_dir": None}
        out: Future = Future()
        try:
            self._await_restart(index)
            ref = self._actors[index].evaluate.remote(payload)
        except (RayError, TimeoutError) as exc:
            self._settle(index)
            out.set_result(self._lost(job, exc))
            return out

        def finished(done: Future) -> None:
            self._settle(index)
            try:
                result = EvalResult.from_dict(done.result())
                result.queue["actor"] = index
            except (RayError, ConnectionError) as exc:
                with self._lock:
                    self._suspect.add(index)
                result = self._lost(job, exc)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                out.set_exception(exc)
                return
            out.set_result(result)

        ref.future().add_done_callback(finished)
        return out

    def evaluate(self, job: EvalJob, task=None) -> EvalResult:
        return self.submit(job, task).result()

    def stats(self) -> dict:
        return {"backend": self.backend, "actors": ray.get([actor.stats.remote() for actor in self._actors]),
                "outstanding": list(self._outstanding)}

    def close(self) -> None:
        """End the actors (only the service that made them does; a pickled copy lets go, a forked one
        drops its connection)."""
        if os.getpid() != self._pid:
            if self._bridge is not None:
                self._bridge.client().close()
            return
        if self._bridge is not None:
            self._bridge.close()
        if self._owner:
            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            _await_ended(self._actors)
        self._actors = []

    def _await_restart(self, index: int, limit_s: float = 300.0) -> None:
        """After an actor lost a job, wait until it (restarted by Ray) answers again."""
        if index not in self._suspect:
            return
        deadline = time.monotonic() + limit_s
        while True:
            try:
                ray.get(self._actors[index].pid.remote(), timeout=30)
                break
            except (RayError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
        with self._lock:
            self._suspect.discard(index)

    def _settle(self, index: int) -> None:
        with self._lock:
            self._outstanding[index] -= 1

    def _lost(self, job: EvalJob, exc: BaseException) -> EvalResult:
        return EvalResult(job.mode, self.backend,
                          error=f"[service] the Ray actor evaluating this was lost ({type(exc).__name__}); Ray "
                                "restarts it. Nothing counts from this evaluation: run it again.")

    def __deepcopy__(self, memo: dict) -> "RayService":
        """The service itself, as for a LocalService: a copy within the process is the same handle
        (pickling, for another process, gives a handle on the same actors that does not own them)."""
        return self

    def __getstate__(self) -> dict:
        return {"backend": self.backend, "address": self.address, "names": list(self._names)}

    def __setstate__(self, state: dict) -> None:
        if not ray.is_initialized():
            ray.init(address=state["address"] or "auto")
        self.backend, self.address, self._names = state["backend"], state["address"], state["names"]
        try:
            self._actors = [ray.get_actor(name, namespace=self.NAMESPACE) for name in self._names]
        except ValueError as exc:
            raise RuntimeError(f"the RayService's actors are gone from the cluster (its maker closed it or "
                               f"ended): {exc}") from None
        self._outstanding = [0] * len(self._actors)
        self._lock = threading.Lock()
        self._suspect = set()
        self._owner = False
        self._pid = os.getpid()
        self._bridge = None


def _await_ended(actors: list, limit_s: float = 60.0) -> None:
    """Returns once every killed actor refuses calls, or after ``limit_s``: ``ray.kill`` only asks
    for the end, and a call made just after it may still run on the actor (seen under load in CI)."""
    deadline = time.monotonic() + limit_s
    for actor in actors:
        while (left := deadline - time.monotonic()) > 0:
            try:
                ray.get(actor.pid.remote(), timeout=left)
            except RayActorError:
                break
            except RayError:  # the wait ran out (GetTimeoutError): stop waiting
                return
            time.sleep(0.05)
