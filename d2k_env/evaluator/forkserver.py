"""The fork server: one warm Python per process and backend, from which workers' supervisors are forked.

A worker started by exec pays its own Python's start: importing torch and Triton and patching the
interpreter, 3.3 s of CPU per process on a 2-core machine, which was 95% of an evaluation's work on
the CPU interpreter (two workers per evaluation). The fork server pays it once per process: started
by :func:`shared` (``python -m d2k_env.evaluator.forkserver FD``) when a
:class:`~d2k_env.evaluator.pool.WorkerPool` first asks, it imports and prepares what every worker of
its backend needs (:func:`worker.prepare`: nothing of a device, a task or a solution), then waits on
a socket. For each worker the env sends the worker's environment and directory, with five
descriptors (the supervisor's stdin and stdout, the channel, the status pipe and a memory file
holding the confinement, whose size nothing bounds); the server
forks, and the child becomes that worker's supervisor exactly as :mod:`~d2k_env.evaluator.reaper`
describes (limits, network namespace, subreaper, cgroup, stop signals, the nonce), except that the
worker it forks confines itself and then runs :func:`worker.serve` in place of exec: a copy of a
Python in which no solution ever ran. Each worker still serves one evaluation and exits. Every pool,
env and lane of the process shares the server of its backend and GPU, so a process pays the imports
once, not once per env.

Lifetimes: the server dies with the env's process. ``PR_SET_PDEATHSIG`` fires when the *thread*
that started a child ends, so the servers are started by one thread that lives as long as the
process (:func:`shared`); a server also exits when its socket closes (the process ended). Each
supervisor it forked dies with it (``PR_SET_PDEATHSIG`` again), taking its worker down and removing
its directory. A killed server is replaced at the next request. The server is not dumpable, so that
a worker of the same user on a machine without Landlock cannot write its memory through ``/proc``
(seccomp already refuses ``ptrace``). The env learns a supervisor's end from the server, which reaps it.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from d2k_env import tempdirs

MESSAGE_LIMIT = 1 << 20  # a request's bytes: the environment (the confinement comes in a memory file)
START_TIMEOUT_S = 300.0  # the server's first answer waits for its imports (seconds on a loaded machine)
_DESCRIPTORS = 5  # stdin, stdout, channel, status, confinement: in this order


class ForkServerDied(RuntimeError):
    """The fork server ended (killed, or its start failed): its log's tail says why."""


class ForkedSupervisor:
    """The part of :class:`subprocess.Popen` the sandbox uses, for a supervisor the fork server forked
    (the server's child, which the server reaps): ``pid`` (also its process group's id),
    ``stdin``, ``stdout``, :meth:`poll`, :meth:`wait` and ``returncode`` (the exit status the server
    reported; -SIGHUP when the server itself ended, which ends every supervisor it forked)."""

    def __init__(self, server: "ForkServer", pid: int, stdin, stdout):
        self.server, self.pid, self.stdin, self.stdout = server, pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"supervisor {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


class ForkServer:
    """A started fork server for workers of one backend (``interpret``) and GPU (``gpu``), which dies
    with the thread that started it (:attr:`thread`; :func:`shared` starts each from a thread that
    lives as long as the process); a supervisor dies with the server. :meth:`spawn` forks a
    supervisor, from any thread; :meth:`close` ends the server."""

    def __init__(self, interpret: bool, gpu: str | None):
        from d2k_env.evaluator.sandbox import child_environment, prepare_server

        self.interpret, self.gpu = interpret, gpu
        self.thread = threading.current_thread()
        self.directory = Path(tempdirs.mkdtemp("forkserver"))
        self._lock = threading.Lock()
        self._ended: dict[int, int] = {}
        self._dead = False
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(self.directory / "log", "wb")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
                env=child_environment(str(self.directory), self.directory / "triton-cache", interpret, gpu=gpu),
                pass_fds=(theirs.fileno(),), start_new_session=True, preexec_fn=prepare_server)
        except BaseException:
            self._sock.close()
            raise
        finally:
            theirs.close()
            log.close()

    def alive(self) -> bool:
        """Running, and its directory still there (a temp cleaner, or a test that removed the
        temporary directory it was started in, leaves a server that can fork nothing)."""
        return not self._dead and self._proc.poll() is None and self.directory.is_dir()

    def spawn(self, confinement_fd: int, env: dict[str, str], cwd: str, loopback: bool,
              channel_fd: int, status_fd: int) -> ForkedSupervisor:
        """Fork a supervisor for one worker: ``confinement_fd`` (a memory file of its JSON, see
        ``confine.to_memfd``; the caller closes its copy), ``env`` and ``cwd`` (its
        scratch directory) as a supervisor started by exec would get them, ``loopback`` whether its
        network namespace keeps loopback up, ``channel_fd`` and ``status_fd`` the write ends of its
        channel and status pipes (the caller closes its copies). Raises :class:`ForkServerDied`."""
        request = json.dumps({"env": env, "cwd": cwd, "loopback": loopback}).encode()
        if len(request) > MESSAGE_LIMIT:
            raise ValueError(f"a fork request of {len(request)} bytes is over {MESSAGE_LIMIT}")
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        with self._lock:
            try:
                if self._dead:
                    raise ForkServerDied(self._why())
                try:
                    socket.send_fds(self._sock, [request], [stdin_read, stdout_write, channel_fd, status_fd,
                                                            confinement_fd])
                except OSError as exc:
                    self._dead = True
                    raise ForkServerDied(self._why()) from exc
                pid = self._await_fork()
            except BaseException:
                for fd in (stdin_write, stdout_read):
                    os.close(fd)
                raise
            finally:
                os.close(stdin_read)
                os.close(stdout_write)
        return ForkedSupervisor(self, pid, os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"))

    def _await_fork(self) -> int:
        """Read the server's messages until it names the supervisor it forked (its ends come too)."""
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self._sock], [], [], left)[0]:
                self._dead = True
                raise ForkServerDied(f"no answer in {START_TIMEOUT_S:.0f} s. " + self._why())
            message = self._receive()
            if message is None:
                raise ForkServerDied(self._why())
            if "forked" in message:
                pid = int(message["forked"])
                self._ended.pop(pid, None)  # an earlier supervisor's, whose pid this one reuses
                return pid
            if "error" in message:
                raise ForkServerDied(f"it could not fork: {message['error']}")

    def _receive(self) -> dict | None:
        """One message (an end it reports is recorded); None once the server is gone."""
        try:
            data = self._sock.recv(MESSAGE_LIMIT)
        except OSError:
            data = b""
        if not data:
            self._dead = True
            return None
        message = json.loads(data)
        if "ended" in message:
            self._ended[int(message["ended"])] = int(message["status"])
        return message

    def exit_status(self, pid: int) -> int | None:
        """The exit status of supervisor ``pid`` once the server reaped it (-SIGHUP once the server
        itself is gone: its supervisors died with it); None while it runs."""
        with self._lock:
            while not self._dead and select.select([self._sock], [], [], 0)[0]:
                self._receive()
            if pid in self._ended:
                return self._ended.pop(pid)  # the handle keeps it: a long-lived server's record stays small
            if self._dead or self._proc.poll() is not None:
                self._dead = True
                return -signal.SIGHUP
            return None

    def _why(self) -> str:
        try:
            tail = (self.directory / "log").read_bytes()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            tail = ""
        status = self._proc.poll()
        return f"the fork server ended (status {status})" + (f"; its output ends with:\n{tail}" if tail else "")

    def close(self) -> None:
        """End the server (its supervisors die with it) and remove its directory. Safe to call twice."""
        with self._lock:
            self._dead = True
            self._sock.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        tempdirs.remove_tree(self.directory)


# -- one server per process and backend ------------------------------------------------------------

_servers: dict[tuple[bool, str | None], ForkServer] = {}
_servers_lock = threading.Lock()
_starts: "queue.SimpleQueue | None" = None  # requests to the starting thread
_owner = os.getpid()  # the process these belong to


def shared(interpret: bool, gpu: str | None) -> ForkServer:
    """This process's fork server for ``interpret`` and ``gpu``, started now when there is none (or
    it died: killed, or its start failed), by the process's starting thread. Raises
    :class:`ForkServerDied` when it cannot start."""
    key = (interpret, gpu)
    if os.getpid() != _owner:
        _forget_after_fork()
    with _servers_lock:
        server = _servers.get(key)
        if server is not None and server.alive():
            return server
        if server is not None:
            server.close()
        reply: queue.SimpleQueue = queue.SimpleQueue()
        _starting_thread().put((key, reply))
        server = reply.get()
        if isinstance(server, BaseException):
            raise ForkServerDied(f"the fork server could not start: {server!r}") from server
        _servers[key] = server
        return server


def _starting_thread() -> "queue.SimpleQueue":
    """The queue of the thread that starts this process's servers: a daemon that waits on it for
    as long as the process lives, so that no server dies with a thread that merely ended."""
    global _starts
    if _starts is None:
        _starts = queue.SimpleQueue()
        threading.Thread(target=_start_servers, args=(_starts,), name="d2k-fork-servers", daemon=True).start()
    return _starts


def _start_servers(requests: "queue.SimpleQueue") -> None:
    while True:
        (interpret, gpu), reply = requests.get()
        try:
            reply.put(ForkServer(interpret, gpu))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            reply.put(exc)


def close_all() -> None:
    """End every fork server of this process (their supervisors die with them). The next request
    starts a new one. (In a forked child, the parent's are left alone.)"""
    if os.getpid() != _owner:
        _forget_after_fork()
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()


def _forget_after_fork() -> None:
    """In a child forked from the process (``multiprocessing``, say): none of the parent's servers
    is its own (their socket is shared, their starting thread did not come along, and the lock may
    have been held by a thread that did not either)."""
    global _servers, _servers_lock, _starts, _owner
    _servers, _servers_lock, _starts, _owner = {}, threading.Lock(), None, os.getpid()


atexit.register(close_all)


# -- the server's side ------------------------------------------------------------------------------

def _serve_forked(channel_fd: int, processes: bool) -> None:
    from d2k_env.evaluator import worker
    # As under ``python -m``, the harness is ``__main__``: what a solution reaches through it (and
    # what the run's fingerprint sees changed) is the same in a forked worker as in an exec'd one.
    sys.modules["__main__"] = worker
    worker.serve(channel_fd, processes, prepared=True)
    sys.stdout.flush()


def _become_supervisor(server: int, request: dict, fds: list[int]) -> int:
    """In the forked child: set up as a supervisor started by exec would be, then supervise."""
    from d2k_env.evaluator import reaper
    from d2k_env.evaluator.sandbox import prepare_supervisor

    stdin, output, channel, status, confinement = fds
    os.setsid()  # its own process group, as the env's killpg expects
    prepare_supervisor(request["loopback"])
    if os.getppid() != server:  # the server died before PR_SET_PDEATHSIG was set
        return 0
    os.dup2(stdin, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(stdin)
    os.close(output)
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # computed again from the worker's TMPDIR
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # where ``-m`` would have put it
    return reaper.supervise(channel, status, server, reaper.load_confine().read_fd(confinement), [],
                            serve=_serve_forked)


def main(sock_fd: int) -> None:
    from d2k_env.evaluator import reaper, worker

    reaper.prctl(reaper.PR_SET_DUMPABLE, 0)
    sock = socket.socket(fileno=sock_fd)
    worker.prepare()
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up descriptor hears it
    me = os.getpid()
    while True:
        ready = select.select([sock, wake_read], [], [])[0]
        if wake_read in ready:
            _reap_supervisors(sock, wake_read)
        if sock not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MESSAGE_LIMIT, _DESCRIPTORS)
        except OSError:
            return
        if not data:
            return  # the pool closed, or the env's process ended
        try:
            request = json.loads(data)
            if len(fds) != _DESCRIPTORS:
                raise ValueError(f"{len(fds)} descriptors came, not {_DESCRIPTORS}")
            pid = os.fork()
        except (ValueError, OSError) as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": str(exc)})
            continue
        if pid == 0:
            code = 127
            try:
                sock.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_read)
                os.close(wake_write)
                code = _become_supervisor(me, request, fds)
            except BaseException as exc:  # noqa: BLE001 - nothing here may return into the server's loop
                os.write(2, f"d2k fork server: cannot start a supervisor: {exc!r}\n".encode())
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        _send(sock, {"forked": pid})


def _reap_supervisors(sock: socket.socket, wake_read: int) -> None:
    """After SIGCHLD: empty the wake-up pipe, reap every supervisor that ended and tell the env each one."""
    try:
        while os.read(wake_read, 4096):
            pass
    except BlockingIOError:
        pass
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"ended": pid, "status": os.waitstatus_to_exitcode(status)})


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the env is gone: the next receive says so


if __name__ == "__main__":
    main(int(sys.argv[1]))
