"""The supervisor between the env and an evaluation worker: no process the evaluation starts outlives it.

Run by :mod:`d2k_env.evaluator.sandbox` as ``python -I -S reaper.py CHANNEL_FD STATUS_FD PARENT_PID
CONFINEMENT_FD [LAUNCHER]`` (CONFINEMENT_FD: a memory file holding the confinement's JSON, of any
size; LAUNCHER: a JSON argv prefix, e.g. the GPU memory checker; a script, not ``-m``: the package, and torch with it, is never imported here). It never runs agent
code. It makes itself the *child subreaper* of everything below it (Linux ``PR_SET_CHILD_SUBREAPER``),
so an orphan under it (a fork that called ``setsid()`` or ``setpgid()``, a double fork) is
re-parented to it rather than to init: nothing below can leave its process tree. Then it starts the
worker at once (``python -m d2k_env.evaluator.worker CHANNEL_FD``, stdout/stderr inherited, killed by
the kernel if the supervisor dies), before any request exists, so that the worker can warm up
(imports, the CUDA context) while it waits: a spare. Only then does it read the request from its own
stdin (until EOF), keep the nonce and hand the rest to the worker's stdin; an EOF without a request
(a spare closed unused) hands it nothing, and the worker exits. It waits for a stop request: SIGTERM
(or SIGINT, SIGQUIT), sent by the env when the evaluation is over, or SIGHUP, sent by the kernel when
the env's thread that started it dies (the env sets ``PR_SET_PDEATHSIG`` before exec); a worker that
dies before its request came ends the wait too (the env then sees the spare gone). On a stop it
SIGKILLs every descendant, again and again until none is left (a launcher first gets
``LAUNCHER_GRACE_S`` to exit by itself), reaps them all, writes one JSON line to STATUS_FD (the
worker's exit status, how many other processes it reaped, whether it finished in time) and exits;
stopped by SIGHUP (the env's thread or process died), or ended by an EOF without a request (the env
closed the spare, or died), it removes the worker's directory last, which nobody else may do
after a death. (Its parent, a fork server, may outlive the env by a moment: the EOF says it first.)

With namespaces (confine's ``namespaces`` layer) its child is the worker's stand-in, outside the
worker's PID namespace, which ends as the worker ended: when the worker closes its channel the
supervisor gives it ``STAND_IN_GRACE_S`` to do so before the take-down, so that the report carries
the worker's own exit status. Everything inside the namespace dies with the worker (the kernel's
doing, as for any PID namespace whose first process ends).

What it cannot stop: a process of the same user may SIGKILL it before it cleans up (its orphans
then go to init); the env then kills the worker's process group, and what it can still find under
a stopped or stuck supervisor (see :func:`kill_descendants`), but nothing more.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
# The signal the kernel sends when the env's thread that started the supervisor ends (the env sets
# it with PR_SET_PDEATHSIG); the env's own stop request is SIGTERM.
ORPHANED = signal.SIGHUP
CLEANUP_S = 10.0  # how long the supervisor keeps killing (a process in uninterruptible sleep dies late)
# How long a launcher (the GPU memory checker, which starts the worker and reports on it once the
# worker has exited) gets to finish by itself after a stop request, before it is killed.
LAUNCHER_GRACE_S = 20.0
STAND_IN_GRACE_S = 2.0  # how long a worker's stand-in, its worker ended, gets to exit by itself
WORKER_MODULE = "d2k_env.evaluator.worker"

# Resolved at import, so that a forked child (the sandbox's preexec_fn in a threaded env) never dlsyms.
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def prctl(option: int, arg: int) -> bool:
    return _prctl(option, arg, 0, 0, 0) == 0


# -- the process tree, from /proc --------------------------------------------------------------------

_HAS_CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _children_of(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (a child belongs to the thread that forked it)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(p) for p in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def _parents() -> dict[int, list[int]]:
    """Parent -> children of every process, by a scan of /proc (kernels without ``children`` files)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                tree.setdefault(st[1], []).append(int(name))
    return tree


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), parents first."""
    tree = None if _HAS_CHILDREN_FILES else _parents()
    found, seen, i = [], {root}, -1
    while i < len(found):  # breadth first: found grows while it is walked
        parent = root if i < 0 else found[i]
        i += 1
        for pid in (_children_of(parent) if tree is None else tree.get(parent, [])):
            if pid not in seen:
                seen.add(pid)
                found.append(pid)
    return found


def _kill(pid: int, tree: set[int]) -> bool:
    """SIGKILL ``pid`` if it is still a live process whose parent is in ``tree``.

    A pidfd pins the process before the check, so a pid freed and reused by an unrelated process
    between the walk and the kill is never signalled (a plain kill() where pidfds are missing).
    """
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):
        pass
    try:
        st = _stat(pid)
        if st is None or st[0] == "Z" or st[1] not in tree:
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def kill_descendants(root: int) -> int:
    """One pass: SIGKILL every live process below ``root``; returns how many were signalled.

    Deepest first, so that each is killed while its parent still vouches for it. Processes forked
    during the pass are caught by the next one; orphans of the killed ones are re-parented to the
    nearest subreaper above them, which is in the tree.
    """
    found = descendants(root)
    tree = {root, *found}
    return sum(_kill(pid, tree) for pid in reversed(found))


# -- the supervisor ----------------------------------------------------------------------------------

_CONFINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")
_REMOVAL = os.path.join(os.path.dirname(os.path.dirname(_CONFINE)), "removal.py")
_loaded: dict[str, object] = {}


def _load_by_path(name: str, path: str):
    """The standard-library-only module at ``path``, loaded by path once: the supervisor never
    imports the package."""
    if name not in _loaded:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]


def load_confine():
    """confine.py (see :func:`_load_by_path`)."""
    return _load_by_path("d2k_confine", _CONFINE)


def _spawn_worker(channel_fd: int, stdin_fd: int, layers_fd: int, confinement, cgroup, launcher: list[str],
                  serve=None) -> int:
    """Fork the worker: it joins the evaluation's cgroup, confines itself, reports the layers on
    ``layers_fd`` (closed by the exec) and execs, through ``launcher`` when one is given (a program
    that runs the worker as its child: it gets every layer but Landlock, which the worker's own
    process applies before it execs Python). With ``serve`` (a supervisor forked by the fork server,
    whose Python has torch and Triton imported already) it execs nothing: it closes every file
    descriptor but stdin, stdout, stderr and the channel, and calls ``serve(channel_fd, processes)``
    under the same layers. Nothing of the solution has run yet."""
    argv = [sys.executable, "-m", WORKER_MODULE, str(channel_fd), "processes" if confinement.processes else "no-processes"]
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker-to-be: nothing here may return
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != me:
                os._exit(125)
            os.dup2(stdin_fd, 0)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # what subprocess's restore_signals does
                signal.signal(sig, signal.SIG_DFL)
            if cgroup is not None:
                with open(cgroup.procs, "w") as f:
                    f.write("0")
            layers = confinement.apply(landlock=not launcher)  # with namespaces, from here on in a fork of its own
            if launcher:  # Landlock is applied by the worker's own process (see confine.main), the rest here
                spec = confinement.landlock_memfd()
                argv = [*launcher, sys.executable, "-I", "-S", _CONFINE, str(spec), *argv]
            os.write(layers_fd, json.dumps(layers).encode())
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            if serve is not None:
                # No exec to close what the worker must not hold (the supervisor's pipes, the
                # env's request and status ends): Landlock does not reach descriptors already open.
                os.closerange(3, channel_fd)
                os.closerange(channel_fd + 1, os.sysconf("SC_OPEN_MAX"))
                serve(channel_fd, confinement.processes)
                os._exit(0)
            os.set_inheritable(channel_fd, True)
            os.execv(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001
            try:
                os.write(2, f"d2k supervisor: cannot start the worker: {exc!r}\n".encode())
            finally:
                os._exit(127)
    return pid


def _relay(worker_channel: int, channel_fd: int, nonce: str, ended: threading.Event) -> None:
    """Forward the worker's channel to the env, each JSON object stamped with the nonce.

    The nonce lives here, in a process the worker can neither read nor signal: the env takes
    only what came through the supervisor. A line that is no JSON object goes on unstamped, and
    the env calls it forged. Closes the env's channel when the worker's closes, and sets ``ended``.
    """
    buffer = b""
    with os.fdopen(worker_channel, "rb", buffering=0) as src, os.fdopen(channel_fd, "wb", buffering=0) as dst:
        try:
            while chunk := src.read(65536):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        msg = None
                    if isinstance(msg, dict):
                        line = json.dumps({**msg, "nonce": nonce}).encode()
                    dst.write(line + b"\n")
            if buffer:
                dst.write(buffer)
        except OSError:
            pass  # the env is gone
        finally:
            ended.set()  # before the env's end closes: its stop request may come at once


def _feed(fd: int, data: bytes) -> None:
    """Write the worker's request to its stdin and close it."""
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError:
        pass  # the worker died before reading it


def _dispatch(worker_stdin: int, worker_channel: int, channel_fd: int, dispatched: threading.Event,
              unused: threading.Event, channel_ended: threading.Event) -> None:
    """Wait for the env's request on stdin (until EOF), keep its nonce, hand the rest to the worker,
    then relay the worker's channel (a thread: the main one waits for signals). An EOF without a
    request (a spare closed unused, or its env dead) sets ``unused`` and gives the worker an empty
    stdin, and it exits."""
    with os.fdopen(0, "rb", closefd=False) as stdin:
        data = stdin.read()
    if not data:
        unused.set()
        for fd in (worker_stdin, worker_channel, channel_fd):
            os.close(fd)
        return
    request = json.loads(data)
    nonce = request.pop("nonce", "")  # kept here: the worker never sees it
    dispatched.set()
    _feed(worker_stdin, json.dumps(request).encode())
    _relay(worker_channel, channel_fd, nonce, channel_ended)


class Reaped:
    """What the supervisor reaped: the worker's exit status, and how many other processes."""

    def __init__(self, worker: int | None):
        self.worker, self.status, self.others = worker, None, 0

    def reap(self) -> bool:
        """Reap every child that has ended; False once the supervisor has no children at all."""
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.worker:
                self.status = os.waitstatus_to_exitcode(wstatus)
            else:
                self.others += 1


def await_worker(reaped: Reaped, deadline_s: float) -> None:
    """Reap until the worker has exited or the deadline passes (a launcher's report comes at its exit)."""
    end = time.monotonic() + deadline_s
    while reaped.reap() and reaped.status is None and time.monotonic() < end:
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)


def _is_stand_in(pid: int, name: str) -> bool:
    """Whether ``pid`` is a worker's stand-in (see confine's namespaces layer): once its worker
    ended it exits by itself, with the worker's status, in a moment; killed before, it would
    report SIGKILL instead of what the worker did."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == name
    except OSError:
        return False


def take_down(reaped: Reaped, deadline_s: float = CLEANUP_S) -> bool:
    """Kill and reap every descendant; True when none is left (before the deadline)."""
    end = time.monotonic() + deadline_s
    me = os.getpid()
    while reaped.reap():
        if time.monotonic() > end:
            return False
        kill_descendants(me)
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)  # a child died (or 50 ms passed): reap again
    return True


def main(argv: list[str]) -> int:
    launcher = json.loads(argv[5]) if len(argv) > 5 else []
    return supervise(int(argv[1]), int(argv[2]), int(argv[3]), load_confine().read_fd(int(argv[4])), launcher)


def supervise(channel_fd: int, status_fd: int, parent: int, confinement_json: str, launcher: list[str],
              serve=None) -> int:
    """The supervisor's life, from starting the worker to the status report (see the module's
    docstring); ``serve`` as in :func:`_spawn_worker`. Returns the exit status."""
    # Stop requests wait in the mask until sigwait takes them; SIGCHLD too (for sigtimedwait).
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    os.set_inheritable(status_fd, False)
    os.set_inheritable(channel_fd, False)
    report: dict = {"worker": None, "others": 0, "clean": False, "subreaper": False, "oom_kills": 0}
    confine = load_confine()
    confinement = confine.Confinement.from_json(confinement_json)
    worker, cgroup, dispatched, unused, channel_ended = None, None, threading.Event(), threading.Event(), threading.Event()
    if os.getppid() == parent:  # else the env died before PR_SET_PDEATHSIG was set: start nothing
        report["subreaper"] = prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_DUMPABLE, 0)  # no ptrace, no /proc/<pid>/fd or mem for processes below
        cgroup = confine.MemoryCgroup.create(f"d2k-eval-{os.getpid()}", confinement.cgroup_bytes,
                                             confinement.max_processes)
        worker_channel, worker_end = os.pipe()
        stdin_read, stdin_write = os.pipe()
        layers_read, layers_write = os.pipe()
        try:
            worker = _spawn_worker(worker_end, stdin_read, layers_write, confinement, cgroup, launcher, serve)
        except OSError as exc:
            report["error"] = f"cannot start the worker: {exc}"
        for fd in (worker_end, stdin_read, layers_write):
            os.close(fd)
        with os.fdopen(layers_read, "rb") as f:
            layers = f.read()
        report["layers"] = json.loads(layers) if layers else {}
        report["layers"]["cgroup"] = (
            f"memory {confinement.cgroup_bytes / 2**30:.0f} GiB"
            + (f", {cgroup.max_tasks} tasks" if cgroup.max_tasks else "") + f" ({'v2' if cgroup.v2 else 'v1'})"
        ) if cgroup else confine.MemoryCgroup.absent
        threading.Thread(target=_dispatch, args=(stdin_write, worker_channel, channel_fd, dispatched, unused,
                                                 channel_ended), daemon=True).start()
    else:
        os.close(channel_fd)
    reaped = Reaped(worker)
    stop = None
    if worker is not None:  # reap what ends meanwhile (orphans included) until asked to stop
        while (stop := signal.sigwait(STOP_SIGNALS | {signal.SIGCHLD})) == signal.SIGCHLD:
            reaped.reap()
            if reaped.status is not None and not dispatched.is_set():
                break  # the worker died before its request came: this spare is gone
        if launcher:
            await_worker(reaped, LAUNCHER_GRACE_S)
        elif channel_ended.is_set() and _is_stand_in(worker, confine.STAND_IN_NAME):
            await_worker(reaped, STAND_IN_GRACE_S)  # the worker closed its channel: it is ending
    report["clean"] = take_down(reaped)
    report["worker"], report["others"] = reaped.status, reaped.others
    if cgroup is not None:
        report["oom_kills"] = cgroup.oom_kills()
        cgroup.remove()
    try:
        os.write(status_fd, (json.dumps(report) + "\n").encode())
    except OSError:
        pass  # the env is gone
    if stop == ORPHANED or os.getppid() != parent or unused.is_set():
        _remove_worker_directory()
    return 0


def _remove_worker_directory() -> None:
    """The env's thread that started this supervisor ended (with its process, perhaps), so nobody
    may remove the worker's directory: the one above the scratch directory this supervisor runs
    in, a ``d2k-eval-*``. (When only the thread ended, the env removes it too; that is harmless.)"""
    directory = os.path.dirname(os.getcwd())
    if os.path.basename(directory).startswith("d2k-eval-"):
        # The package's remover (whatever tree the worker left), loaded by path like confine.py.
        _load_by_path("d2k_removal", _REMOVAL).remove_tree(directory)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
