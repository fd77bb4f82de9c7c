"""A service's evaluations for the processes it is handed to: its forked and spawned children.

An async vector env runs each env in a child process, forked or spawned, and a service given to
``gym.make_vec(..., evaluator=service)`` goes with the envs. It cannot run there itself: a fork
copies none of a :class:`~d2k_env.service.LocalService`'s lane threads (a job queued in the copy
waited forever), and a Ray driver does not survive a fork. So a service listens, from the moment it
is made, on a Unix socket in a directory only its user can enter, for peers that prove they hold its
random key (:class:`BridgeServer`; where the temporary directory's path is too long for a socket,
an abstract one, guarded by the key alone). In a child the service sends its jobs there: a forked copy
through :meth:`BridgeServer.client`, an unpickled one as a :class:`BridgeClient`. The service's own
process runs them in its lanes, scheduled with everything else it serves, and sends the results back
as plain data. The children share the service as the envs of one process do.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
from concurrent.futures import Future
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any, Callable

from d2k_env import tempdirs
from d2k_env.evaluator.protocol import EvalResult
from d2k_env.service.job import EvalJob


class BridgeServer:
    """Listens for a service's children and submits their jobs through ``submit`` (the service's)."""

    def __init__(self, submit: Callable[[EvalJob], Future], backend: str):
        self.backend = backend
        self._submit = submit
        self._directory = tempdirs.make("bridge")  # mode 0700: only this user reaches the socket
        self.address = str(Path(self._directory.name) / "socket")
        if len(self.address.encode()) >= _PATH_LIMIT:  # a deep temporary directory: an abstract socket,
            self.address = f"\0d2k-bridge-{secrets.token_hex(16)}"  # which only the key guards
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener(self.address, "AF_UNIX", authkey=self.authkey)
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()
        self._connections: list[Connection] = []
        self._clients: dict[int, BridgeClient] = {}  # by process: a forked copy's own client
        self._thread = threading.Thread(target=self._accept, name="d2k-bridge", daemon=True)
        self._thread.start()

    def client(self) -> "BridgeClient":
        """This process's client of the service (called in a forked copy of it)."""
        pid = os.getpid()
        client = self._clients.get(pid)
        if client is None:
            client = self._clients[pid] = BridgeClient(self.address, self.authkey, self.backend)
        return client

    def close(self) -> None:
        """Stop listening and drop the children's connections (their waiting jobs fail with a message)."""
        if os.getpid() != self._pid or self._closed:
            return
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        try:  # wakes the accepting thread, which sees the service closed
            Client(self.address, "AF_UNIX", authkey=self.authkey).close()
        except OSError:
            pass
        self._thread.join()
        self._listener.close()
        for connection in connections:
            _shut(connection)
        self._directory.cleanup()

    def _accept(self) -> None:
        while True:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError, AuthenticationError):  # a peer without the key, or one that left
                if self._closed:
                    return
                continue
            with self._lock:
                if self._closed:
                    connection.close()
                    return
                self._connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), name="d2k-bridge-client", daemon=True).start()

    def _serve(self, connection: Connection) -> None:
        send_lock = threading.Lock()

        def reply(number: int, future: Future) -> None:
            try:
                message = (number, True, future.result().to_dict())
            except BaseException as exc:  # noqa: BLE001 - the child gets it as its future's exception
                message = (number, False, f"{type(exc).__name__}: {exc}")
            try:
                with send_lock:
                    connection.send(message)
            except (OSError, ValueError):
                pass  # the child left: nobody waits for this result

        try:
            while True:
                number, job = connection.recv()
                try:
                    future = self._submit(EvalJob.from_dict(job))
                except Exception as exc:  # noqa: BLE001 - a closed service, say: the child's future says so
                    future = Future()
                    future.set_exception(exc)
                future.add_done_callback(lambda done, number=number: reply(number, done))
        except (EOFError, OSError, TypeError, ValueError):
            pass  # the child closed its end (or sent something else than a job): this connection ends
        finally:
            with self._lock:
                if connection in self._connections:
                    self._connections.remove(connection)
            connection.close()


class BridgeClient:
    """A service as a child process sees it: ``submit`` sends the job to the process that made the
    service and returns a future of its result. It pickles (into a grandchild, say) as itself;
    ``close`` drops this process's connection and leaves the service running."""

    def __init__(self, address: str, authkey: bytes, backend: str):
        self.address, self.authkey, self.backend = address, authkey, backend
        self._pid: int | None = None

    def submit(self, job: EvalJob, task: Any = None) -> Future:
        if not isinstance(job, EvalJob):
            raise TypeError(f"submit takes an EvalJob, not {type(job).__name__}")
        future: Future = Future()
        self._connect()
        with self._lock:
            if self._gone is not None:
                raise RuntimeError(self._gone)
            number = next(self._numbers)
            self._pending[number] = future
            try:
                self._connection.send((number, job.to_dict()))
            except (OSError, ValueError) as exc:
                del self._pending[number]
                raise RuntimeError(f"{_GONE} ({type(exc).__name__})") from None
        return future

    def evaluate(self, job: EvalJob, task: Any = None) -> EvalResult:
        return self.submit(job, task).result()

    def close(self) -> None:
        if self._pid == os.getpid() and self._gone is None:
            _shut(self._connection)

    def _connect(self) -> None:
        """Connect once per process: a forked copy of a client starts afresh (its parent's locks and
        connection are the parent's)."""
        if self._pid == os.getpid():
            return
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._pending: dict[int, Future] = {}
        self._gone: str | None = None
        try:
            self._connection = Client(self.address, "AF_UNIX", authkey=self.authkey)
        except (OSError, EOFError, AuthenticationError) as exc:
            raise RuntimeError(f"{_GONE} ({type(exc).__name__}: {exc})") from None
        self._pid = os.getpid()
        threading.Thread(target=self._read, name="d2k-bridge-reader", daemon=True).start()

    def _read(self) -> None:
        connection = self._connection
        try:
            while True:
                number, ok, payload = connection.recv()
                with self._lock:
                    future = self._pending.pop(number, None)
                if future is None:
                    continue
                if ok:
                    future.set_result(EvalResult.from_dict(payload))
                else:
                    future.set_exception(RuntimeError(payload))
        except (EOFError, OSError):
            pass
        with self._lock:
            self._gone = _GONE
            pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(RuntimeError(_GONE))

    def __reduce__(self):
        return BridgeClient, (self.address, self.authkey, self.backend)

    def __deepcopy__(self, memo: dict) -> "BridgeClient":
        return self  # a handle on the service, as the service's own deep copy is


_PATH_LIMIT = 108  # bytes of a Unix socket's path (sun_path), its terminating NUL included

_GONE = ("the evaluation service this process was given is gone: the process that made it closed it or "
         "ended; keep the service open while its envs run")


def _shut(connection: Connection) -> None:
    """Close ``connection`` so that a thread blocked reading it wakes up (a bare close would not)."""
    try:
        with socket.socket(fileno=os.dup(connection.fileno())) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    connection.close()
