"""Runs the evaluation worker in a child process that the env always outlives.

The child gets its own session (so a timeout kills its whole process group, forks included), a
private scratch directory as working directory and HOME, the episode's Triton cache, a file-size
limit, and a ``sys.path`` that does not contain the agent's workspace. Its result comes back on a
dedicated pipe; stdout and stderr are kept only as text to show the agent.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from d2k_env.evaluator.protocol import EvalRequest

FILE_SIZE_LIMIT = 64 * 2**20  # no file the child writes may exceed this: output floods die here
OUTPUT_TAIL_CHARS = 4000

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


@dataclass
class WorkerOutcome:
    result: dict | None  # None when the child never delivered a result
    output: str  # the tail of what the child printed
    returncode: int | None
    timed_out: bool


def read_tail(path: Path, limit: int = OUTPUT_TAIL_CHARS) -> str:
    """The last ``limit`` characters of a log file, with a note when anything was cut."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 4 * limit))
        text = f.read().decode("utf-8", "replace")
    if size > 4 * limit or len(text) > limit:
        text = f"[output clipped: {size} bytes in all; the last {limit} characters follow]\n" + text[-limit:]
    return text


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


def run_worker(req: EvalRequest, *, timeout_s: float, triton_cache: Path, interpret: bool) -> WorkerOutcome:
    """Run one evaluation in a fresh child process and collect its result."""
    with tempfile.TemporaryDirectory(prefix="d2k-eval-") as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "D2K_"))}
        env.update(HOME=scratch, TMPDIR=scratch, TRITON_CACHE_DIR=str(triton_cache), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p))
        if interpret:
            env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        read_fd, write_fd = os.pipe()
        log_path = Path(scratch) / "output.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "d2k_env.evaluator.worker", str(write_fd)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=scratch, env=env,
                pass_fds=(write_fd,), start_new_session=True, preexec_fn=_limit_child)
        os.close(write_fd)
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(read_fd, chunks), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.stdin.write(req.to_json().encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc)
        reader.join(timeout=10)
        output = read_tail(log_path)
        raw = b"".join(chunks)
        result = None
        if raw and not timed_out:
            try:
                result = json.loads(raw)
            except json.JSONDecodeError:
                result = None
        return WorkerOutcome(result, output, proc.returncode, timed_out)


def _drain(fd: int, chunks: list[bytes]) -> None:
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(65536):
            chunks.append(chunk)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group, including anything it forked, and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
