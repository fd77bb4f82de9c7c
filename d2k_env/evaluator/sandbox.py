"""Runs an evaluation worker in a child process that the env always outlives.

The child gets its own session (so a kill takes its whole process group, forks included), a
private scratch directory as working directory, HOME and TMPDIR, the episode's Triton cache, a
scrubbed environment, resource limits (file size, CPU time, processes), no network where the OS
allows a private network namespace, and a ``sys.path`` without the agent's workspace. Progress and
the result come back as JSON lines on a dedicated pipe; each phase (load, check, time, ...) has its
own time limit. stdout and stderr are kept only as clipped text to show the agent.
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
_CLONE_NEWNET = 0x40000000


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
        ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNET)
    except (OSError, AttributeError):
        pass


def child_environment(scratch: str, triton_cache: Path, interpret: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST or k.startswith("LC_")}
    env.update(HOME=scratch, TMPDIR=scratch, TRITON_CACHE_DIR=str(triton_cache), PYTHONUNBUFFERED="1",
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p))
    if interpret:
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    return env


def run_worker(req: EvalRequest, *, limits: PhaseLimits, triton_cache: Path, interpret: bool) -> WorkerOutcome:
    """Run one worker in a fresh child process, enforcing per-phase time limits."""
    with tempfile.TemporaryDirectory(prefix="d2k-eval-") as scratch:
        read_fd, write_fd = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", "d2k_env.evaluator.worker", str(write_fd)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=scratch,
            env=child_environment(scratch, triton_cache, interpret),
            pass_fds=(write_fd,), start_new_session=True, preexec_fn=_limit_child)
        os.close(write_fd)
        output = OutputTail(proc.stdout)
        try:
            proc.stdin.write(req.to_json().encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        result, stopped = _follow(read_fd, limits, output)
        _kill_group(proc)
        return WorkerOutcome(result, output.text(), proc.returncode, stopped)


def _follow(fd: int, limits: PhaseLimits, output: OutputTail) -> tuple[dict | None, str | None]:
    """Read the channel until the result arrives, the child exits, or it breaks a limit."""
    phase, workload, started = "start", "", time.monotonic()
    buffer, result = b"", None
    with os.fdopen(fd, "rb", buffering=0) as channel:
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
                except json.JSONDecodeError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if "result" in msg:
                    result = msg["result"]
                elif "phase" in msg:
                    phase, workload, started = str(msg["phase"]), str(msg.get("workload", "")), time.monotonic()


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group, including anything it forked, and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
