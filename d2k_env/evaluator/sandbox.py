"""Runs an evaluation worker in a child process that the env always outlives.

The child gets its own session, a private scratch directory as working directory, HOME and TMPDIR,
the episode's Triton cache, a scrubbed environment, resource limits (file size, CPU time,
processes), no network where the OS allows a private network namespace, and a ``sys.path`` without
the agent's workspace. Progress and the result come back as JSON lines on a dedicated pipe; each
phase (load, check, time, ...) has its own time limit. stdout and stderr are kept only as clipped
text to show the agent.

Guarantee: no process started by an evaluation outlives it, wherever it went (``setsid()``,
``setpgid()``, double forks). The child is a supervisor (:mod:`d2k_env.evaluator.reaper`, which never
runs agent code) that makes itself the child subreaper of the worker's whole tree, so orphans below
it are re-parented to it rather than to init; when the evaluation ends (the result arrived, the
worker died, a limit was hit, or an exception reached :func:`run_worker`) the env asks it to SIGKILL
and reap every descendant, then kills its process group as before. If the env itself dies (even by
SIGKILL) the kernel tells the supervisor (``PR_SET_PDEATHSIG``), which takes the tree down the same
way; if the supervisor dies, the kernel kills the worker. The env never waits on a supervisor that
misbehaves: past a deadline it kills what it still finds under it, then the supervisor. Not covered:
code that SIGKILLs the supervisor before it cleans up (any process of the same user may): the
supervisor's orphans then go to init.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from d2k_env.evaluator import reaper
from d2k_env.evaluator.protocol import EvalRequest

FILE_SIZE_LIMIT = 4 * 2**30  # per file the child writes: saved outputs of the largest workloads fit
OUTPUT_LIMIT = 64 * 2**20  # bytes the child may print in all before it is killed
OUTPUT_TAIL_CHARS = 4000
CPU_SECONDS = 3600
MAX_PROCESSES = 4096  # per user; ignored for root (the static policy forbids forking anyway)
# Variables the child inherits; everything else (keys, tokens, the parent's PYTHON* settings) is dropped.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
                 "NVIDIA_VISIBLE_DEVICES", "CC", "CXX", "PYTHONPATH")

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
_REAPER = str(Path(reaper.__file__).resolve())
_CLONE_NEWNET = 0x40000000
# Resolved here: the preexec_fn runs in a forked child of a possibly threaded env, where dlopen may deadlock.
_UNSHARE = getattr(ctypes.CDLL(None, use_errno=True), "unshare", None)
# How long the env waits for the supervisor to report that the tree is down; then it kills the tree itself.
SUPERVISOR_GRACE_S = reaper.CLEANUP_S + 5


@dataclass
class PhaseLimits:
    """Seconds each phase may take; a phase not listed gets ``default``."""

    limits: dict[str, float] = field(default_factory=lambda: {"load": 120, "ceilings": 60, "check": 300,
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


class OutputTail:
    """Drains the child's stdout/stderr in a thread, keeping only the tail and a byte count."""

    def __init__(self, stream, limit: int = OUTPUT_TAIL_CHARS):
        self.stream, self.limit = stream, limit
        self.total = 0
        self.tail = b""
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while chunk := self.stream.read1(65536):
            self.total += len(chunk)
            self.tail = (self.tail + chunk)[-4 * self.limit:]

    def text(self) -> str:
        self.thread.join(timeout=5)
        text = self.tail.decode("utf-8", "replace")
        if self.total > len(self.tail) or len(text) > self.limit:
            text = f"[output clipped: {self.total} bytes in all; the last {self.limit} characters follow]\n" \
                   + text[-self.limit:]
        return text


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
    try:  # a private network namespace has no interfaces but a down loopback: no network at all
        _UNSHARE(_CLONE_NEWNET)
    except (OSError, TypeError):
        pass


def _start_supervisor() -> None:
    """In the supervisor before exec: the limits, and SIGTERM (its stop request) when the env dies."""
    _limit_child()
    reaper.prctl(reaper.PR_SET_PDEATHSIG, signal.SIGTERM)


def child_environment(scratch: str, triton_cache: Path, interpret: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST or k.startswith("LC_")}
    env.update(HOME=scratch, TMPDIR=scratch, TRITON_CACHE_DIR=str(triton_cache), PYTHONUNBUFFERED="1",
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p))
    if interpret:
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    return env


def run_worker(req: EvalRequest, *, limits: PhaseLimits, triton_cache: Path, interpret: bool) -> WorkerOutcome:
    """Run one worker in a fresh child process, enforcing per-phase time limits.

    When this returns (or raises), every process the evaluation started is gone.
    """
    with tempfile.TemporaryDirectory(prefix="d2k-eval-") as scratch:
        read_fd, write_fd = os.pipe()
        status_read, status_write = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _REAPER, str(write_fd), str(status_write), str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=scratch,
                env=child_environment(scratch, triton_cache, interpret),
                pass_fds=(write_fd, status_write), start_new_session=True, preexec_fn=_start_supervisor)
        except BaseException:
            os.close(read_fd)
            os.close(status_read)
            raise
        finally:
            os.close(write_fd)
            os.close(status_write)
        result, stopped = None, None
        try:
            channel = os.fdopen(read_fd, "rb", buffering=0)
            output = OutputTail(proc.stdout)
            try:
                proc.stdin.write(req.to_json().encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            result, stopped = _follow(channel, limits, output, req.nonce)
        finally:
            returncode, strays = _take_down(proc, status_read)
        return WorkerOutcome(result, output.text(), returncode, stopped, strays)


def _follow(channel, limits: PhaseLimits, output: OutputTail, nonce: str) -> tuple[dict | None, str | None]:
    """Read the channel until the result arrives, the child exits, or it breaks a limit.

    Only the harness knows ``nonce``: a message without it, or a second result, was written by the
    solution (a forged result, or phase changes that would stretch its time limits) and ends it.
    """
    phase, workload, started = "start", "", time.monotonic()
    buffer, result = b"", None
    with channel:
        while True:
            budget = limits[phase] - (time.monotonic() - started)
            if budget <= 0:
                where = f" of workload {workload}" if workload else ""
                return None, f"phase '{phase}'{where} exceeded its {limits[phase]:.0f} s limit"
            if output.total > OUTPUT_LIMIT:
                return None, f"it printed more than {OUTPUT_LIMIT // 2**20} MB"
            ready, _, _ = select.select([channel], [], [], min(budget, 0.2))
            if not ready:
                continue
            chunk = channel.read(65536)
            if not chunk:
                return result, None  # the child closed the channel: finished, or died
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:  # not JSON, or not UTF-8
                    msg = None
                if not isinstance(msg, dict) or msg.get("nonce") != nonce:
                    return None, "[forged-result] the result channel carried a message the harness did not send"
                if "result" in msg:
                    if result is not None:
                        return None, "[forged-result] the result channel carried a second result"
                    result = msg["result"]
                elif "phase" in msg:
                    phase, workload, started = str(msg["phase"]), str(msg.get("workload", "")), time.monotonic()


def _take_down(proc: subprocess.Popen, status_fd: int) -> tuple[int | None, int]:
    """End the evaluation: every process it started is killed and reaped, the supervisor included.

    Returns the worker's exit status (the supervisor's when it never told) and the strays reaped.
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
    returncode = report["worker"] if isinstance(report.get("worker"), int) else proc.returncode
    return returncode, int(report.get("others") or 0)


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
