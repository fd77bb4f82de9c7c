"""Warm workers: one spare per role, kept for the evaluations on one backend and GPU.

A worker (:class:`~d2k_env.evaluator.sandbox.Worker`) depends on nothing but its role, its backend
and its GPU: the task's snapshot, the outputs and the Triton cache are put in its own directories
when an evaluation takes it. So one pool serves every evaluator of its thread, whatever the task
and whoever's cache: an evaluation service holds one pool per lane, not one per environment.
"""

from __future__ import annotations

import threading
import weakref

import time

from d2k_env.evaluator.confine import landlock_abi
from d2k_env.evaluator import forkserver
from d2k_env.evaluator.forkserver import ForkServer, ForkServerDied
from d2k_env.evaluator.memcheck import MemcheckTool
from d2k_env.evaluator.sandbox import Worker

ROLES = ("solution", "replay", "check")
MEMCHECK = "memcheck"  # a replay worker started under the GPU memory checker


class WorkerPool:
    """Workers of one backend (``interpret``) and GPU (``gpu``: the workers' ``CUDA_VISIBLE_DEVICES``;
    None keeps the caller's), handed out by :meth:`take`, each for one evaluation.

    With ``spares=True``, :meth:`replenish` (called once an evaluation's workers are done, so that a
    spare's warm-up never competes with them, on the GPU never with a timed run) keeps one started
    worker per role: sandboxed exactly as a fresh one, it imports torch and Triton and on the GPU
    creates its CUDA context while it waits, with nothing of a task or a solution in reach. That
    saves the workers' start-up (seconds per process) on every evaluation after the first, for two
    idle processes held. Spares are kept only where Landlock scopes signals (ABI 6+): an idle spare
    lives beside the solution under evaluation, which must reach neither its files nor its process;
    elsewhere every evaluation starts its workers fresh (``spares`` then reads False).

    On the GPU, :meth:`keep_memcheck` adds a third kind, a solution worker started under the GPU
    memory checker (whose start, the tool attaching and the CUDA context under it, is the slow part
    of a memory-checked run). :meth:`wait_warm` waits until every spare is warm: nothing is timed on
    a GPU while a spare beside it still starts up.

    With ``fork=True`` workers are forked from the process's fork server for this backend and GPU
    (:func:`~d2k_env.evaluator.forkserver.shared`, which every pool of the process shares): a copy of
    a Python that imported torch and Triton once, so a worker costs milliseconds of CPU instead of
    seconds. A worker under the memory checker is started by exec.

    A forked supervisor dies with the fork server, which dies with the process; one started by exec
    dies with the thread that started it (``PR_SET_PDEATHSIG``), so such a spare is handed only to an
    evaluation on that thread; from any other thread :meth:`take` starts a fresh worker.
    :meth:`close` ends the spares; they never outlive the pool or the process.
    """

    def __init__(self, interpret: bool, gpu: str | None = None, spares: bool = True, fork: bool = True):
        self.interpret, self.gpu, self.fork = interpret, gpu, fork
        self.spares = spares and landlock_abi() >= 6
        self.memcheck: MemcheckTool | None = None
        self._idle: dict[str, Worker] = {}
        # Spares taken down when the pool is collected or the process exits without close().
        self._close_idle = weakref.finalize(self, _close_all, self._idle)

    def keep_memcheck(self, tool: MemcheckTool) -> None:
        """Keep a spare under ``tool`` too (the GPU memory checker), from the next :meth:`replenish`."""
        self.memcheck = tool

    def start(self, kind: str) -> Worker:
        """A worker of ``kind`` (a role, or :data:`MEMCHECK`) started now."""
        if kind == MEMCHECK:
            if self.memcheck is None:
                raise ValueError("no memory checker was given to this pool (keep_memcheck)")
            return Worker.start("replay", self.interpret, self.gpu, memcheck=self.memcheck)
        server = self._fork_server()
        if server is not None:
            try:
                return Worker.start(kind, self.interpret, self.gpu, server=server)
            except ForkServerDied:  # killed: the next worker gets a new one
                pass
        return Worker.start(kind, self.interpret, self.gpu)

    def _fork_server(self) -> ForkServer | None:
        """The process's fork server for this pool's backend and GPU (started now when there is none,
        or a dead one); None without ``fork`` or when it cannot start."""
        if not self.fork:
            return None
        try:
            return forkserver.shared(self.interpret, self.gpu)
        except ForkServerDied:
            return None

    def take(self, kind: str) -> tuple[Worker, bool]:
        """A worker of ``kind`` (a role, or :data:`MEMCHECK`) for one evaluation, and whether it is a
        spare (which may still die before it takes its request: the caller then runs the request
        again on :meth:`start`'s)."""
        spare = self._idle.pop(kind, None)
        if spare is not None and self._usable(spare):
            return spare, True
        if spare is not None:
            spare.close()
        return self.start(kind), False

    def replenish(self) -> None:
        """One live spare per role (and under the memory checker, once kept), started from the calling thread."""
        if not self.spares:
            return
        for kind in ROLES + ((MEMCHECK,) if self.memcheck else ()):
            spare = self._idle.get(kind)
            if spare is None or not self._usable(spare):
                if spare is not None:
                    spare.close()
                self._idle[kind] = self.start(kind)

    def wait_warm(self, timeout: float = 120.0) -> None:
        """Wait until every spare is warm (a dead one, or ``timeout`` seconds in all, ends the wait)."""
        deadline = time.monotonic() + timeout
        for spare in list(self._idle.values()):
            spare.wait_warm(max(0.0, deadline - time.monotonic()))

    @staticmethod
    def _usable(spare: Worker) -> bool:
        """Alive (not killed while idle, its starting thread not gone) and, started by exec, started
        by the calling thread: such a spare dies with the thread that started it, even
        mid-evaluation, so another thread's spare could die under an evaluation it was handed."""
        return (spare.server is not None or spare.thread is threading.current_thread()) and spare.alive()

    def idle(self) -> dict[str, Worker]:
        """The spares waiting now, by role (a copy)."""
        return dict(self._idle)

    def close(self) -> None:
        """Take down and remove the spares; none starts after this (the fork server is the process's,
        and stays). Safe to call more than once."""
        self.spares = self.fork = False
        self._close_idle()


def _close_all(workers: dict[str, Worker]) -> None:
    while workers:
        workers.popitem()[1].close()
