"""The local evaluation service: lanes over this machine's GPUs (or, on the interpreter, its CPUs).

A lane is a thread bound to one GPU with a pool of warm workers of its own (forked from the
process's fork server; a spare lives until its lane closes its pool). Jobs wait in one
queue, first come first served, under one rule per GPU: a timed job (``benchmark``, ``submit`` and
``profile`` on the GPU) starts only when nothing else of this service runs on its GPU, and while a
timed job waits, no correctness-only job starts on a busy GPU ahead of it; correctness-only jobs
share. Between services, envs and ``d2k eval`` (other processes) the same rule holds through the
GPU's machine-wide lease (see :mod:`d2k_env.evaluator.gpu_lease`), which a job holds from its start
to its end (so its evaluator takes none of its own). Every worker gets its lane's GPU as its only
``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from d2k_env import tempdirs
from d2k_env.evaluator import Evaluator, EvalResult, resolve_backend
from d2k_env.evaluator.memcheck import find_memcheck
from d2k_env.evaluator.pool import WorkerPool
from d2k_env.service.bridge import BridgeClient, BridgeServer
from d2k_env.service.gpus import GpuLease, lock_directory, physical_gpu, visible_gpus
from d2k_env.service.job import EvalJob
from d2k_env.task import Task, load_task


@dataclass
class _Pending:
    job: EvalJob
    task: Task | None
    future: Future
    submitted: float
    position: int  # jobs ahead of it in the queue when it came
    timed: bool


@dataclass
class _GpuUse:
    exclusive: bool = False
    shared: int = 0


@dataclass
class _Lane:
    index: int
    gpu: str | None
    thread: threading.Thread | None = None
    pool: WorkerPool | None = None
    busy: bool = False
    done: int = 0


class LocalService:
    """Evaluations on this machine, queued and scheduled over its GPUs; :meth:`submit` takes an
    :class:`EvalJob` and returns a future of its :class:`EvalResult`.

    ``backend``: ``cuda``, ``interpreter`` or ``auto``. On the GPU, ``gpus`` (names as in
    ``CUDA_VISIBLE_DEVICES``; default: every GPU this process may use) each get ``lanes_per_gpu``
    lanes: two let a correctness-only job run beside another (a timed job always runs alone). On
    the interpreter there are ``jobs`` lanes (default: one per CPU). ``spares`` keeps warm workers
    in each lane, started as the lane starts (so the first job finds them warming, both roles at
    once), and on the GPU a third, a solution worker under the GPU memory checker where the machine
    has one, so that a submission's memory-checked run starts warm. ``lease_dir`` is where the
    cross-process GPU leases live (default: one directory per user under the temporary directory).

    Each result's ``queue`` says where and how long its job waited: ``lane``, ``gpu``, ``position``
    (jobs ahead of it when it came), ``waited_s`` (until its lane started it, leases included), and
    when it held its GPU: ``started`` and ``ended`` (Unix time); its ``lease`` the GPU's lease the job
    held (phase ``job``).
    The device's ceilings (bandwidth, GEMM rate) are measured by a lane's first timed job and reused
    by the lane after. ``close()`` ends the lanes (a job already running finishes; queued ones are
    cancelled) and their workers; nothing outlives it or the process.

    Other processes: the service serves the processes it is handed to (those of an async vector env,
    forked or spawned) through :mod:`d2k_env.service.bridge`. A forked copy, or the client a pickled
    one becomes, sends its jobs to this process's lanes. Only this process closes the service.
    """

    def __init__(self, backend: str = "auto", gpus: list[str] | None = None, lanes_per_gpu: int = 2,
                 jobs: int | None = None, spares: bool = True, lease_dir: str | Path | None = None):
        self.backend = resolve_backend(backend)
        self.spares = spares
        if self.backend == "cuda":
            self.gpus = [str(g) for g in (gpus if gpus is not None else visible_gpus())]
            if not self.gpus:
                raise ValueError("the cuda backend needs a GPU: none is visible (CUDA_VISIBLE_DEVICES, torch)")
            if lanes_per_gpu < 1:
                raise ValueError(f"lanes_per_gpu must be at least 1, not {lanes_per_gpu}")
            self._lanes = [_Lane(i, gpu) for i, (gpu, _) in
                           enumerate((g, k) for k in range(lanes_per_gpu) for g in self.gpus)]
        else:
            count = jobs if jobs is not None else (os.cpu_count() or 1)
            if count < 1:
                raise ValueError(f"jobs must be at least 1, not {count}")
            self.gpus = []
            self._lanes = [_Lane(i, None) for i in range(count)]
        self.lease_dir = Path(lease_dir) if lease_dir else (lock_directory() if self.gpus else None)
        self._queue: list[_Pending] = []
        self._use = {gpu: _GpuUse() for gpu in self.gpus}
        self._cond = threading.Condition()
        self._closed = False
        self._scratch = tempdirs.make("service")
        self._caches: dict[str, Path] = {}  # by client
        self._ceilings: dict[str | None, dict[str, float]] = {}  # by GPU: measured once, reused
        self._pid = os.getpid()
        self._bridge = BridgeServer(self.submit, self.backend)
        for lane in self._lanes:
            lane.thread = threading.Thread(target=self._serve, args=(lane,), name=f"d2k-lane-{lane.index}",
                                           daemon=True)
            lane.thread.start()

    # -- The interface ---------------------------------------------------------------------------
    def submit(self, job: EvalJob, task: Task | None = None) -> Future:
        """Queue ``job``; ``task`` (the loaded task, when the caller has it) saves loading it by id."""
        if os.getpid() != self._pid:  # a forked copy: the lanes stayed with the process that made them
            return self._bridge.client().submit(job)
        if not isinstance(job, EvalJob):
            raise TypeError(f"submit takes an EvalJob, not {type(job).__name__}")
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the evaluation service is closed")
            self._queue.append(_Pending(job, task, future, time.monotonic(), len(self._queue) + self._running(),
                                        job.timed(self.backend)))
            self._cond.notify_all()
        return future

    def evaluate(self, job: EvalJob, task: Task | None = None) -> EvalResult:
        """Submit ``job`` and wait for its result."""
        return self.submit(job, task).result()

    def stats(self) -> dict:
        """What the service is doing now: queued and running jobs, and each lane's state."""
        with self._cond:
            return {"backend": self.backend, "queued": len(self._queue), "running": self._running(),
                    "lanes": [{"lane": lane.index, "gpu": lane.gpu, "busy": lane.busy, "done": lane.done}
                              for lane in self._lanes]}

    def close(self) -> None:
        """Cancel the queued jobs, let running ones finish, end the lanes and their workers. In a
        forked copy, drop this process's connection only: the service is its maker's to close."""
        if os.getpid() != self._pid:
            self._bridge.client().close()
            return
        with self._cond:
            if self._closed:
                return
            self._closed = True
            queued, self._queue = self._queue, []
            self._cond.notify_all()
        for pending in queued:
            pending.future.cancel()
        self._bridge.close()
        for lane in self._lanes:
            if lane.thread is not threading.current_thread():
                lane.thread.join()
        self._scratch.cleanup()

    def __reduce__(self):
        """Pickled (into a spawned process, say), the service is a client of this one's lanes."""
        if self._closed:
            raise TypeError("this LocalService is closed: a closed service cannot be handed to another process")
        return BridgeClient, (self._bridge.address, self._bridge.authkey, self.backend)

    def __deepcopy__(self, memo: dict) -> "LocalService":
        """The service itself: it is a handle on shared workers, not a value. Gymnasium deep-copies an
        env's spec, its kwargs (``evaluator=service``) included, for ``env.spec``."""
        return self

    def __enter__(self) -> "LocalService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- Scheduling ------------------------------------------------------------------------------
    def _running(self) -> int:
        return sum(lane.busy for lane in self._lanes)

    def _admits(self, gpu: str | None, index: int) -> bool:
        """Whether the queue's job at ``index`` may start on ``gpu`` now (the caller holds the lock)."""
        if gpu is None:
            return True
        use, pending = self._use[gpu], self._queue[index]
        if pending.timed:
            return not use.exclusive and use.shared == 0
        # Correctness-only work shares, but does not crowd out a timed job waiting ahead of it.
        return not use.exclusive and not (any(p.timed for p in self._queue[:index]) and use.shared)

    def _next(self, lane: _Lane) -> _Pending | None:
        """The first queued job the lane's GPU admits, taken off the queue (None once closed)."""
        with self._cond:
            while not self._closed:
                for index in range(len(self._queue)):
                    if self._admits(lane.gpu, index):
                        pending = self._queue.pop(index)
                        if lane.gpu is not None:
                            use = self._use[lane.gpu]
                            use.exclusive, use.shared = pending.timed or use.exclusive, use.shared + (not pending.timed)
                        lane.busy = True
                        return pending
                self._cond.wait()
            return None

    def _finished(self, lane: _Lane, pending: _Pending) -> None:
        with self._cond:
            if lane.gpu is not None:
                use = self._use[lane.gpu]
                if pending.timed:
                    use.exclusive = False
                else:
                    use.shared -= 1
            lane.busy = False
            lane.done += 1
            self._cond.notify_all()

    # -- A lane ----------------------------------------------------------------------------------
    def _serve(self, lane: _Lane) -> None:
        pool = lane.pool = WorkerPool(interpret=self.backend == "interpreter", gpu=lane.gpu, spares=self.spares)
        if lane.gpu is not None and self.spares and (tool := find_memcheck()):
            pool.keep_memcheck(tool)  # warm for the first submission, not only for those after it
        try:
            pool.replenish()
            while (pending := self._next(lane)) is not None:
                try:
                    if pending.future.set_running_or_notify_cancel():
                        try:
                            pending.future.set_result(self._run(lane, pool, pending))
                        except BaseException as exc:  # noqa: BLE001 - the caller gets it from the future
                            pending.future.set_exception(exc)
                finally:
                    self._finished(lane, pending)
        finally:
            pool.close()

    def _run(self, lane: _Lane, pool: WorkerPool, pending: _Pending) -> EvalResult:
        """The job, under its GPU's lease (exclusive when timed), with where and how long it waited."""
        lease = GpuLease(physical_gpu(lane.gpu), pending.timed, self.lease_dir) if lane.gpu is not None else None
        if lease is not None:
            lease.acquire()
        held = time.monotonic()
        try:
            if pending.timed:  # the GPU is this job's alone: the other lanes' spares are warm, or dead
                for other in self._lanes:
                    if other is not lane and other.gpu == lane.gpu and other.pool is not None:
                        other.pool.wait_warm()
            waited, started = time.monotonic() - pending.submitted, time.time()
            result = self._evaluate(lane, pool, pending)
            ended = time.time()
        finally:
            if lease is not None:
                lease.release()
        if lease is not None:
            result.lease = [{"phase": "job", "gpu": lease.key, "exclusive": lease.exclusive,
                             "waited_s": round(lease.waited_s, 3), "held_s": round(time.monotonic() - held, 3)}]
        result.queue = {"lane": lane.index, "gpu": lane.gpu, "position": pending.position, "waited_s": round(waited, 3),
                        "started": started, "ended": ended}
        return result

    def _evaluate(self, lane: _Lane, pool: WorkerPool, pending: _Pending) -> EvalResult:
        job = pending.job
        task = pending.task if pending.task is not None and pending.task.id == job.task_id else load_task(job.task_id)
        with tempfile.TemporaryDirectory(prefix="job-", dir=self._scratch.name) as directory:
            evaluator = Evaluator(task, self.backend,
                                  cache_dir=job.cache_dir or self._client_cache(job.client) or Path(directory) / "cache",
                                  limits=job.limits, time_budget_s=job.time_budget_s, memcheck=job.memcheck,
                                  gpu=lane.gpu, pool=pool, take_leases=False)
            evaluator.ceilings = self._ceilings.get(lane.gpu)
            path = Path(directory) / "solution.py"
            path.write_text(job.source)
            try:
                result = evaluator.evaluate(path, job.mode, workloads=list(job.workloads) if job.workloads else None,
                                            seed=job.seed)
            finally:
                evaluator.close()
        if result.ceilings:
            self._ceilings.setdefault(lane.gpu, result.ceilings)
        return result

    def _client_cache(self, client: str) -> Path | None:
        """The Triton cache kept for ``client`` while the service lives (None for no client)."""
        if not client:
            return None
        with self._cond:
            if client not in self._caches:
                self._caches[client] = Path(tempfile.mkdtemp(prefix="cache-", dir=self._scratch.name))
            return self._caches[client]
