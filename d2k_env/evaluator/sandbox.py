"""Runs an evaluation worker in a child process that the env always outlives.

The child gets its own session, a private scratch directory as working directory, HOME and TMPDIR,
the episode's Triton cache, a scrubbed environment, resource limits (file size, CPU time,
processes), no network where the OS allows a private network namespace, its own mount, PID and
IPC namespaces where the OS allows them (see :mod:`d2k_env.evaluator.confine`), and a ``sys.path``
without the agent's workspace. Its confinement travels in a memory file, whatever its size. Progress and the result come back as JSON lines on a dedicated pipe; each
phase (load, check, time, ...) has its own time limit, counted from the moment the request is
handed over. stdout and stderr are kept only as clipped text to show the agent. A worker may be
started before its request exists (:class:`Worker`, a spare that warms up meanwhile); it still
serves exactly one.

Guarantee: no process started by an evaluation outlives it, wherever it went (``setsid()``,
``setpgid()``, double forks). The child is a supervisor (:mod:`d2k_env.evaluator.reaper`, which never
runs agent code) that makes itself the child subreaper of the worker's whole tree, so orphans below
it are re-parented to it rather than to init; when the evaluation ends (the result arrived, the
worker died, a limit was hit, or an exception reached :meth:`Worker.run`) the env asks it to SIGKILL
and reap every descendant, then kills its process group as before. If the env itself dies (even by
SIGKILL) the kernel tells the supervisor (``PR_SET_PDEATHSIG``), which takes the tree down the same
way; if the supervisor dies, the kernel kills the worker. The env never waits on a supervisor that
misbehaves: past a deadline it kills what it still finds under it, then the supervisor. Not covered:
code that SIGKILLs the supervisor before it cleans up (any process of the same user may): the
supervisor's orphans then go to init.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import functools
import glob
import json
import os
import platform
import resource
import secrets
import select
import signal
import site
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from d2k_env import tempdirs
from d2k_env.evaluator import reaper
from d2k_env.evaluator.confine import Confinement, landlock_abi, reachable_by_others, to_memfd
from d2k_env.evaluator.forkserver import ForkedSupervisor, ForkServer
from d2k_env.evaluator.memcheck import LOG_NAME, MemcheckTool, read_log
from d2k_env.evaluator.protocol import EvalRequest

FILE_SIZE_LIMIT = 4 * 2**30  # per file the child writes: saved outputs of the largest workloads fit
# Resident memory of one evaluation (its cgroup) and, on the interpreter, its address space; a
# worker importing torch and Triton needs about 1 GiB, the largest GPU workload a few more.
MEMORY_LIMIT = min(32 * 2**30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
ADDRESS_SPACE_SLACK = 8 * 2**30  # virtual beyond resident: libraries, thread stacks, allocator arenas
OUTPUT_LIMIT = 64 * 2**20  # bytes the child may print in all before it is killed
OUTPUT_TAIL_CHARS = 4000
CPU_SECONDS = 3600
MAX_PROCESSES = 4096  # the supervisor's, per user (ignored for root); the worker gets its own, see confine
SYSTEM_READ_ROOTS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev")
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# Variables the child inherits; everything else (keys, tokens, the parent's PYTHON* settings) is dropped.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
                 "NVIDIA_VISIBLE_DEVICES", "CC", "CXX", "PYTHONPATH")

NAMESPACES_VAR = "D2K_SANDBOX_NAMESPACES"  # "0": no namespaces for workers (Landlock steps around instead)

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
_REAPER = str(Path(reaper.__file__).resolve())
_CLONE_NEWNET = 0x40000000
# Resolved here: the preexec_fn runs in a forked child of a possibly threaded env, where dlopen may deadlock.
_UNSHARE = getattr(ctypes.CDLL(None, use_errno=True), "unshare", None)
_SIGNAL = ctypes.CDLL(None).signal
_SIGNAL.argtypes, _SIGNAL.restype = [ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
_SIG_DFL = None  # NULL
# How long the env waits for the supervisor to report that the tree is down; then it kills the tree itself.
SUPERVISOR_GRACE_S = reaper.CLEANUP_S + reaper.LAUNCHER_GRACE_S + 5
_SIOCSIFFLAGS, _IFF_UP = 0x8914, 0x1


PHASES = ("load", "ceilings", "record", "replay", "check", "verify", "time", "profile")  # what the worker announces


@dataclass
class PhaseLimits:
    """Seconds each phase may take; a phase not listed gets ``default``."""

    limits: dict[str, float] = field(default_factory=lambda: {"load": 120, "ceilings": 60, "record": 300,
                                                               "replay": 300, "check": 300,
                                                               "verify": 300, "time": 300, "profile": 300})
    default: float = 300

    def __getitem__(self, phase: str) -> float:
        return self.limits.get(phase, self.default)


@dataclass
class WorkerOutcome:
    result: dict | None  # None when the child never delivered a result
    output: str  # the tail of what the child printed
    returncode: int | None
    stopped: str | None  # why the harness killed it (a phase over its time limit, an output flood)
    strays: int = 0  # processes besides the worker that the supervisor reaped (orphans, leftovers it killed)
    layers: dict[str, str] = field(default_factory=dict)  # the sandbox's layers and their state, by name
    oom_kills: int = 0  # processes its memory cgroup's limit killed
    memcheck_log: str = ""  # the GPU memory checker's log, when the worker ran under it
    began: bool = True  # whether its channel carried anything: False, nothing of the request ran
    timeline: list = field(default_factory=list)  # (phase, workload, second since the dispatch) entered


# The line a worker prints once warm, followed by the token its environment gave it.
WARM_MARK = "d2k-worker-warm:"


class OutputTail:
    """Drains the child's stdout/stderr in a thread, keeping only the tail and a byte count.

    With ``warm_mark``, the line the worker prints once warm (see worker.main) sets ``warm`` and is
    taken out of the output; nothing of a solution can run before it.
    """

    def __init__(self, stream, limit: int = OUTPUT_TAIL_CHARS, warm_mark: bytes | None = None):
        self.stream, self.limit, self.warm_mark = stream, limit, warm_mark
        self.total = 0
        self.tail = b""
        self.warm = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while chunk := self.stream.read1(65536):
            self.total += len(chunk)
            self.tail = (self.tail + chunk)[-4 * self.limit:]
            if self.warm_mark and not self.warm.is_set() and self.warm_mark in self.tail:
                self.tail = self.tail.replace(self.warm_mark, b"", 1)
                self.total -= len(self.warm_mark)
                self.warm.set()

    def text(self) -> str:
        self.thread.join(timeout=5)
        text = self.tail.decode("utf-8", "replace")
        if self.total > len(self.tail) or len(text) > self.limit:
            text = f"[output clipped: {self.total} bytes in all; the last {self.limit} characters follow]\n" \
                   + text[-self.limit:]
        return text


def _limit_child(loopback: bool) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    try:  # a private network namespace has no interfaces but a down loopback: no network at all
        if _UNSHARE(_CLONE_NEWNET) == 0 and loopback:
            # The memory checker reaches its target over TCP on loopback: up, in this namespace only.
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", _IFF_UP))
    except (OSError, TypeError):
        pass


def prepare_supervisor(loopback: bool) -> None:
    """In the supervisor before exec (or, forked by the fork server, before it supervises): the
    limits, and SIGHUP (a stop request that also removes the worker's directory) when the thread
    that started it, or the env, dies (the fork server, for one it forked)."""
    _limit_child(loopback)
    prepare_server()


def prepare_server() -> None:
    """In the fork server before exec: SIGHUP (which ends it, and every supervisor it forked) when
    the env's thread that started it dies (one that lives as long as the process)."""
    # Under nohup SIGHUP is ignored, and an ignored signal survives exec: the parent-death signal
    # would be discarded. (libc's own call: Python's signal.signal works in the main thread only.)
    _SIGNAL(reaper.ORPHANED, _SIG_DFL)
    reaper.prctl(reaper.PR_SET_PDEATHSIG, reaper.ORPHANED)


_import_root: str | None = None
# One user id per env process for its workers (when it runs as root and Python is reachable).
SANDBOX_UID = 100000 + secrets.randbelow(900000)


def import_root() -> str:
    """A directory holding only a link to the package, on the workers' ``sys.path`` instead of the
    project root (where the references lie); made once per process, never writable by a worker."""
    global _import_root
    if _import_root is None:
        root = tempdirs.mkdtemp("import")
        os.chmod(root, 0o755)
        os.symlink(os.path.join(_PACKAGE_PARENT, "d2k_env"), os.path.join(root, "d2k_env"))
        atexit.register(tempdirs.remove_tree, root)
        _import_root = root
    return _import_root


def _python_roots() -> list[str]:
    """Where the workers' Python finds its modules: prefixes, site-packages and the PYTHONPATH
    entries (a ``pip install --target`` directory, packages installed beside the machine's). An
    entry holding a source checkout of the package is left out (its package directory is a read
    root of its own, see :func:`confinement_for`): a checkout holds more than modules."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    roots.update(p for p in site.getsitepackages() if os.path.isdir(p))
    # A virtual environment's interpreter reads pyvenv.cfg, beside its executable or one level up, as it
    # starts; in a process started without the site module (python -S) sys.prefix does not name it.
    here = os.path.dirname(os.path.abspath(sys.executable))
    roots.update(d for d in (here, os.path.dirname(here)) if os.path.isfile(os.path.join(d, "pyvenv.cfg")))
    checkout = os.path.realpath(_PACKAGE_PARENT) if _is_checkout(_PACKAGE_PARENT) else None
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        real = os.path.realpath(entry) if entry else ""
        if os.path.isdir(real) and (checkout is None or os.path.commonpath([real, checkout]) not in (real, checkout)):
            roots.add(real)
    return sorted(roots)


def _is_checkout(parent: str) -> bool:
    """Whether the package's parent directory is a source tree (an editable install, a checkout on
    PYTHONPATH) rather than an install location (site-packages, a ``--target`` directory)."""
    return os.path.isfile(os.path.join(parent, "pyproject.toml"))


def _hidden_from_workers() -> list[str]:
    """What no worker may read: the expert references of every task directory (inside the package
    when installed from a wheel, hence inside a read root) and the host's secrets."""
    from d2k_env.task import task_dirs
    return [os.path.realpath(d / "references") for d in task_dirs() if (d / "references").is_dir()] + host_secrets()


@functools.lru_cache(maxsize=1)
def host_secrets() -> list[str]:
    """The files and directories under ``/etc`` that other users may not read (``/etc/shadow``,
    private keys): a worker that stays root without capabilities (where Python lies under
    ``/root``) would read them as their owner. Found once per process."""
    found = []
    for top, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode) and not st.st_mode & 0o004:
                found.append(path)
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in found]  # a hidden directory hides all below
    return found


def absent_layers() -> list[str]:
    """The sandbox's layers this machine cannot provide, found without starting a worker (the
    cgroup's is known only when one is made: each result's ``sandbox`` says)."""
    abi = landlock_abi()
    absent = [] if abi >= 6 else [
        "Landlock (this kernel has none: reads and writes are limited by file permissions only)" if not abi else
        f"Landlock's signal scope (ABI {abi} < 6: a worker can signal its supervisor)"]
    if platform.machine() != "x86_64":
        absent.append(f"seccomp (the filter is written for x86-64, not {platform.machine()})")
    return absent


def confinement_for(scratch: str, triton_cache: Path, task_root: str, outputs_dir: str, role: str,
                    interpret: bool, memcheck: MemcheckTool | None = None, port: int = 0,
                    view: str | None = None) -> Confinement:
    """What a worker may reach: read the system, Python, the package and its task snapshot, but
    no reference and no host secret (:func:`_hidden_from_workers`); write its
    scratch, the Triton cache and (the solution and replay roles) the outputs directory; on the
    interpreter, no address space beyond its limit and no helper programs. Under the GPU memory
    checker: read its install tree too, and use its TCP ports (in the private network namespace,
    where one can be made, they reach nothing but the evaluation's own loopback). With ``view``
    (an empty directory) the worker gets namespaces where the machine allows them, unless
    ``D2K_SANDBOX_NAMESPACES=0`` says not to (see confine's ``namespaces`` layer)."""
    package = os.path.join(_PACKAGE_PARENT, "d2k_env")
    triton_cache.mkdir(parents=True, exist_ok=True)  # a rule needs a path that exists
    writable = [scratch, str(triton_cache)] + ([outputs_dir] if role in ("solution", "replay") else [])
    drop_uid = os.geteuid() == 0 and all(map(reachable_by_others, [sys.executable, package, *writable, task_root]))
    if drop_uid:
        for path in writable:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
    cuda_home = [p for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    return Confinement(
        read=[*SYSTEM_READ_ROOTS, *_python_roots(), *cuda_home, package, import_root(), task_root,
              *([outputs_dir] if role == "check" else []), *([memcheck.directory] if memcheck else [])],
        hidden=_hidden_from_workers(), view=view if os.environ.get(NAMESPACES_VAR) != "0" else None,
        write=writable,
        devices=[*DEVICE_FILES, *(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p))],
        uid=SANDBOX_UID if drop_uid else None,
        memory_bytes=None if not interpret else MEMORY_LIMIT + ADDRESS_SPACE_SLACK,
        cgroup_bytes=MEMORY_LIMIT, processes=not interpret, file_size=FILE_SIZE_LIMIT, cpu_seconds=CPU_SECONDS,
        tcp_ports=memcheck.ports(port) if memcheck else [])


def child_environment(scratch: str, triton_cache: Path, interpret: bool, memcheck: bool = False,
                      role: str | None = None, gpu: str | None = None, warm_token: str | None = None) -> dict[str, str]:
    """The supervisor's and the worker's environment: the allow-listed variables, the worker's own
    directories, the backend's switches, and ``D2K_WORKER_ROLE`` where ``role`` is given (a worker
    makes no env, so ``import d2k_env`` registers none there; with ``warm_token``, which it prints
    once warm, see :data:`WARM_MARK`). On the GPU, ``CUDA_VISIBLE_DEVICES``
    is ``gpu`` (one device, as the caller's driver names it: an index or a UUID) where given, and
    the caller's own setting otherwise."""
    env = {k: v for k, v in _environ().items() if k in ENV_ALLOWLIST or k.startswith("LC_")}
    if role is not None:
        env["D2K_WORKER_ROLE"] = role
    if warm_token is not None:
        env["D2K_WARM_TOKEN"] = warm_token
    env.update(HOME=scratch, TMPDIR=scratch, TRITON_CACHE_DIR=str(triton_cache), PYTHONUNBUFFERED="1",
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", USER="d2k-sandbox",
               PYTHONPATH=os.pathsep.join(p for p in (import_root(), os.environ.get("PYTHONPATH")) if p))
    if interpret:
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    elif gpu is not None:
        env.update(CUDA_VISIBLE_DEVICES=gpu)
    if memcheck:  # one driver allocation per tensor, so that the checker sees each tensor's bounds
        env.update(PYTORCH_NO_CUDA_MEMORY_CACHING="1", D2K_WORKER_MEMCHECK="1")
    return env


def _environ() -> dict[str, str]:
    """A copy of ``os.environ``, taken while other threads may change it (a key removed between
    the iteration and the lookup raises; pytest's main thread does it between tests)."""
    for _ in range(100):
        try:
            return dict(os.environ)
        except (KeyError, RuntimeError):
            continue
    return dict(os.environ)


class Worker:
    """One sandboxed worker process, started before its request exists and serving exactly one.

    :meth:`start` makes the worker's private directory with four empty subdirectories (``scratch``:
    its working directory, HOME and TMPDIR; ``task``: where the caller puts the task's snapshot;
    ``outputs``: where the solution role saves its outputs, and where the check role reads them;
    ``triton-cache``: its Triton cache, which the caller fills from its own before the request and
    takes new entries from after it, see :func:`seed_cache` and :func:`harvest_cache`),
    builds its confinement for them (Landlock's rules need paths that exist) and starts the
    supervisor, which forks the confined worker at once. The worker then imports what every
    evaluation needs (and on the GPU creates its CUDA context) and waits for its request: nothing of
    a task or a solution is in its reach until :meth:`run` hands it one. :meth:`run` writes the
    request, follows the channel (each phase's time limit counts from the dispatch) and takes the
    whole process tree down; :meth:`close` takes it down if it never ran and removes the directory.
    The supervisor dies with the thread that started it (``PR_SET_PDEATHSIG``) or, forked, with the
    fork server, taking the worker with it, and it exits by itself when the worker dies before its request came: :meth:`alive` is
    then False. Nothing of a worker depends on the task or on whose cache it serves: any evaluator
    of its backend, role and GPU can take it.
    """

    def __init__(self, role: str, interpret: bool, gpu: str | None, directory: Path, task_dir: Path,
                 outputs_dir: Path, triton_cache: Path, memcheck: MemcheckTool | None,
                 server: ForkServer | None = None):
        self.role, self.interpret, self.gpu, self.memcheck, self.server = role, interpret, gpu, memcheck, server
        self.directory, self.scratch = directory, directory / "scratch"
        self.task_dir, self.outputs_dir, self.triton_cache = task_dir, outputs_dir, triton_cache
        self._proc: subprocess.Popen | ForkedSupervisor | None = None
        self._channel_fd = self._status_fd = -1
        self._output: OutputTail | None = None
        self._ran = False
        self.thread = threading.current_thread()  # started by exec, the thread whose exit ends it (PR_SET_PDEATHSIG)

    @classmethod
    def start(cls, role: str, interpret: bool, gpu: str | None = None, memcheck: MemcheckTool | None = None,
              task_root: str | Path | None = None, outputs_dir: str | Path | None = None,
              triton_cache: str | Path | None = None, server: ForkServer | None = None) -> "Worker":
        """A started worker of ``role`` (``solution`` or ``check``) on the interpreter or the GPU
        (``gpu``: its ``CUDA_VISIBLE_DEVICES``), under ``memcheck`` (which starts it, inside the same
        confinement) when given. ``task_root``, ``outputs_dir`` and ``triton_cache`` put the task
        snapshot, the outputs and the cache in the caller's directories instead of the worker's own
        (the cold path, whose request names them already). With ``server`` (a fork server of the
        same backend and GPU; not with ``memcheck``, whose tool must exec the worker) its supervisor
        is forked from the server, and the worker from that, with torch and Triton imported already;
        otherwise both are started by exec."""
        if server is not None and (memcheck is not None or (server.interpret, server.gpu) != (interpret, gpu)):
            raise ValueError("a fork server serves its own backend and GPU, and no memory-checked worker")
        directory = Path(tempdirs.mkdtemp("eval"))
        for name in ("scratch", "task", "outputs", "triton-cache", "view"):
            (directory / name).mkdir()
        worker = cls(role, interpret, gpu, directory, Path(task_root or directory / "task"),
                     Path(outputs_dir or directory / "outputs"), Path(triton_cache or directory / "triton-cache"),
                     memcheck, server)
        try:
            worker._launch()
        except BaseException:
            worker.close()
            raise
        return worker

    def _launch(self) -> None:
        scratch = str(self.scratch)
        port = 20000 + secrets.randbelow(40000)  # where loopback is shared, evaluations rarely collide
        confinement = confinement_for(scratch, self.triton_cache, str(self.task_dir), str(self.outputs_dir),
                                      self.role, self.interpret, self.memcheck, port, str(self.directory / "view"))
        launcher = [json.dumps(self.memcheck.argv(self.log_path, port))] if self.memcheck else []
        token = secrets.token_hex(8)
        env = child_environment(scratch, self.triton_cache, self.interpret, self.memcheck is not None,
                                self.role, self.gpu, token)
        read_fd, write_fd = os.pipe()
        status_read, status_write = os.pipe()
        spec = to_memfd(confinement.to_json())  # any size: argv and the environment are bounded
        try:
            if self.server is not None:
                self._proc = self.server.spawn(spec, env, scratch, False, write_fd, status_write)
            else:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", _REAPER, str(write_fd), str(status_write), str(os.getpid()),
                     str(spec), *launcher],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=scratch, env=env,
                    pass_fds=(write_fd, status_write, spec), start_new_session=True,
                    preexec_fn=functools.partial(prepare_supervisor, self.memcheck is not None))
        except BaseException:
            os.close(read_fd)
            os.close(status_read)
            raise
        finally:
            for fd in (write_fd, status_write, spec):
                os.close(fd)
        self._channel_fd, self._status_fd = read_fd, status_read
        # What it prints while warming up counts too, but for the line that says it is warm.
        self._output = OutputTail(self._proc.stdout, warm_mark=f"{WARM_MARK}{token}\n".encode())

    @property
    def log_path(self) -> str:
        """The GPU memory checker's log (written only under it)."""
        return str(self.scratch / LOG_NAME)

    def wait_warm(self, timeout: float) -> bool:
        """Wait until the worker is warm (or dead, or ``timeout`` seconds passed); whether it is warm."""
        deadline = time.monotonic() + timeout
        while not self._output.warm.wait(0.1):
            if not self.alive() or time.monotonic() > deadline:
                return False
        return True

    def alive(self) -> bool:
        """Whether it can still take its request: never run, and its supervisor (which exits when an
        idle worker dies) still running."""
        return not self._ran and self._proc is not None and self._proc.poll() is None

    def run(self, req: EvalRequest, limits: PhaseLimits) -> WorkerOutcome:
        """Hand the worker ``req`` (whose role, ``root`` and ``outputs_dir`` must be this worker's) and
        follow it to the end, enforcing per-phase time limits from now. When this returns (or
        raises), every process the evaluation started is gone; the directory stays until :meth:`close`."""
        if (req.role, req.root, req.outputs_dir) != (self.role, str(self.task_dir), str(self.outputs_dir)):
            raise ValueError("the request names another role or other directories than this worker was confined to")
        if self._ran:
            raise RuntimeError("a worker serves one request only")
        self._ran = True
        result, stopped, began, timeline = None, None, False, []
        try:
            channel = os.fdopen(self._channel_fd, "rb", buffering=0)
            self._channel_fd = -1
            try:
                self._proc.stdin.write(req.to_json().encode())
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
            result, stopped, began = _follow(channel, limits, self._output, req, timeline)
        finally:
            report = self._take_down()
        returncode = report["worker"] if isinstance(report.get("worker"), int) else self._proc.returncode
        return WorkerOutcome(result, self._output.text(), returncode, stopped, int(report.get("others") or 0),
                             dict(report.get("layers") or {}), int(report.get("oom_kills") or 0),
                             read_log(self.log_path) if self.memcheck else "", began, timeline)

    def _take_down(self) -> dict:
        """Every process of the worker's tree killed and reaped; the supervisor's report (see _take_down)."""
        status_fd, self._status_fd = self._status_fd, -1
        return _take_down(self._proc, status_fd)

    def close(self) -> None:
        """Take the worker down if it is still up (an unused spare: its closed stdin tells it that no
        request will come) and remove its directory. Safe to call more than once."""
        if self._channel_fd >= 0:
            os.close(self._channel_fd)
            self._channel_fd = -1
        if self._proc is not None and self._status_fd >= 0:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            self._take_down()
        tempdirs.remove_tree(self.directory)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_worker(req: EvalRequest, *, limits: PhaseLimits, triton_cache: Path, interpret: bool,
               gpu: str | None = None, memcheck: MemcheckTool | None = None) -> WorkerOutcome:
    """Run ``req`` in a worker started for it (the cold path: its task snapshot, outputs and Triton
    cache stay in the directories the request and the caller name), enforcing per-phase time
    limits; under ``memcheck`` when given (the tool starts the worker with every layer but Landlock,
    which the worker's own process applies; see reaper._spawn_worker).

    When this returns (or raises), every process the evaluation started is gone.
    """
    with Worker.start(req.role, interpret, gpu, memcheck, req.root, req.outputs_dir, triton_cache) as worker:
        return worker.run(req, limits)


def _follow(channel, limits: PhaseLimits, output: OutputTail, req: EvalRequest,
            timeline: list | None = None) -> tuple[dict | None, str | None, bool]:
    """Read the channel until the result arrives, the child exits, or it breaks a limit. Returns the
    result, why the harness stopped the worker, and whether any message came (a worker that sent
    none never began the evaluation: it died, or was stopped, before or while taking its request).
    ``timeline``, where given, gets each phase entered with its second since the dispatch.

    Every message passed through the supervisor, which stamps it with the nonce only it and the
    env know: a message without it did not. A second result, or a phase the harness would never
    announce (an unknown phase or workload, or one already entered: repeats would stretch the time
    limits without end), was written by the solution and ends the evaluation.
    """
    phase, workload, started = "start", "", time.monotonic()
    dispatched = started
    entered = {(phase, workload)}
    workloads = {"", *req.workloads, *(w["name"] for w in req.heldout)}
    buffer, result, began = b"", None, False
    with channel:
        while True:
            budget = limits[phase] - (time.monotonic() - started)
            if budget <= 0:
                where = f" of workload {workload}" if workload else ""
                return None, f"phase '{phase}'{where} exceeded its {limits[phase]:.0f} s limit", began
            if output.total > OUTPUT_LIMIT:
                return None, f"it printed more than {OUTPUT_LIMIT // 2**20} MB", began
            ready, _, _ = select.select([channel], [], [], min(budget, 0.2))
            if not ready:
                continue
            chunk = channel.read(65536)
            if not chunk:
                return result, None, began  # the child closed the channel: finished, or died
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                began = True
                try:
                    msg = json.loads(line)
                except ValueError:  # not JSON, or not UTF-8
                    msg = None
                if not isinstance(msg, dict) or msg.get("nonce") != req.nonce:
                    return None, "[forged-result] the result channel carried a message the harness did not send", began
                if "result" in msg:
                    if result is not None:
                        return None, "[forged-result] the result channel carried a second result", began
                    result = msg["result"]
                elif "phase" in msg:
                    step = (str(msg["phase"]), str(msg.get("workload", "")))
                    if step in entered or step[0] not in PHASES or step[1] not in workloads:
                        return None, f"[forged-result] the result channel announced phase {step[0]!r} " \
                                     f"{step[1]!r}, which the harness never would", began
                    entered.add(step)
                    (phase, workload), started = step, time.monotonic()
                    if timeline is not None:
                        timeline.append((phase, workload, round(started - dispatched, 3)))


def _take_down(proc: subprocess.Popen, status_fd: int) -> dict:
    """End the evaluation: every process it started is killed and reaped, the supervisor included.

    Returns the supervisor's report (the worker's exit status, the strays reaped, the sandbox's
    layers, out-of-memory kills); empty when it never told.
    """
    try:
        os.kill(proc.pid, signal.SIGTERM)  # the supervisor's stop request (not reaped yet: still our pid)
    except ProcessLookupError:
        pass
    report = _read_report(status_fd, SUPERVISOR_GRACE_S)
    if not report.get("clean"):
        # Stopped, stuck or killed: kill whatever is still to be found under it (a dead one has none).
        for _ in range(20):
            if not reaper.kill_descendants(proc.pid):
                break
            time.sleep(0.05)
    _kill_group(proc)
    return report


def _read_report(fd: int, timeout: float) -> dict:
    """The supervisor's last JSON line on its status pipe, read until it closes or the deadline."""
    data, end = b"", time.monotonic() + timeout
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while (left := end - time.monotonic()) > 0:
            if not select.select([pipe], [], [], left)[0]:
                break
            chunk = pipe.read(65536)
            if not chunk:
                break
            data += chunk
    for line in reversed(data.splitlines()):
        try:
            report = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            continue
        if isinstance(report, dict):
            return report
    return {}


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group, including anything it forked, and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass  # unkillable (uninterruptible sleep): subprocess reaps it later
