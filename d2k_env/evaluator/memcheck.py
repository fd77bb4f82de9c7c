"""The GPU memory checker for ``submit``: the held-out shapes run again under ``compute-sanitizer
--tool memcheck`` where the machine has it, and any invalid access scores ``[out-of-bounds]``.

Why a run of its own: the checker slows every kernel many times over, so it cannot sit in the timed
run, and the held-out shapes (never timed, never published) are where a kernel without masks
shows. Why the caching allocator is switched off in that run: memcheck knows the allocations the
driver made, and PyTorch carves tensors out of large blocks, so a store past a tensor that lands in
the same block is a valid address to it; with one driver allocation per tensor (and padding
between them, where the tool offers it) such a store is out of bounds.

The verdict rests on the tool's exit status (``--error-exitcode``), which the solution, a process
below it, cannot set; its log, which the solution could overwrite, only supplies the message.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass

MEMCHECK_EXIT = 86  # the tool's exit status when it found errors
LOG_NAME = "memcheck.log"
PORTS = 4  # TCP ports the tool may use to reach its target, from a base port chosen per run
DEFAULT_PORT = 49152  # the tool's own base port, where it cannot be given one
PADDING_BYTES = 4096  # after every allocation, so a store just past one tensor cannot hit the next
LOG_LIMIT = 1 << 16  # bytes of the log read back
ABSENT = ("absent: no working compute-sanitizer on this machine; the held-out shapes ran without a GPU "
          "memory checker (only the guard bands around the inputs catch stray stores)")
_SEARCH = ("/usr/local/cuda/bin",)


@dataclass(frozen=True)
class MemcheckTool:
    path: str
    version: str
    options: frozenset[str]  # what its --help lists: options differ between releases

    def argv(self, log_path: str, port: int) -> list[str]:
        """The command line that runs a program under memcheck, the program's own argv to follow."""
        args = [self.path, "--tool", "memcheck", "--error-exitcode", str(MEMCHECK_EXIT), "--log-file", log_path,
                "--print-limit", "10"]
        # The worker imports torch before it touches CUDA: longer than the default wait for a target.
        if "--launch-timeout" in self.options:
            args += ["--launch-timeout", "600"]
        if "--padding" in self.options:
            args += ["--padding", str(PADDING_BYTES)]
        if "--port" in self.options:
            args += ["--port", str(port)]
            if "--max-connections" in self.options:
                args += ["--max-connections", str(PORTS)]
        return args

    def ports(self, port: int) -> list[int]:
        """The TCP ports the tool and its target talk over, for the sandbox to open."""
        base = port if "--port" in self.options else DEFAULT_PORT
        return list(range(base, base + (PORTS if "--port" not in self.options or "--max-connections" in
                                        self.options else 1)))

    @property
    def directory(self) -> str:
        """Its install tree (the injection libraries beside the binary), which the sandbox lets it read."""
        return os.path.dirname(os.path.dirname(os.path.realpath(self.path)))


def _candidates() -> list[str]:
    found = [shutil.which("compute-sanitizer")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append(os.path.join(os.environ[var], "bin", "compute-sanitizer"))
    found += [os.path.join(d, "compute-sanitizer") for d in _SEARCH]
    return [p for p in dict.fromkeys(found) if p and os.access(p, os.X_OK)]


@functools.lru_cache(maxsize=1)
def find_memcheck() -> MemcheckTool | None:
    """The machine's compute-sanitizer, if one answers ``--version``; asked once per process."""
    for path in _candidates():
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
            usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if version.returncode == 0:
            words = re.findall(r"Version\s+(\S+)", version.stdout)
            return MemcheckTool(path, words[-1] if words else "(version unknown)",
                                frozenset(re.findall(r"(--[a-z][a-z-]*)", usage.stdout)))
    return None


def read_log(path: str) -> str:
    """The log's beginning; empty when it is missing or no regular file (the solution may have replaced it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return f.read(LOG_LIMIT).decode("utf-8", "replace")


def never_attached(log: str) -> bool:
    """Whether the tool says it never saw the worker's first CUDA call. The harness makes that call
    (creating the context) before the solution loads, so the solution cannot cause this: the tool
    could not attach to a worker in this sandbox, which makes it absent here, not a failure."""
    return "terminated before first instrumented API call" in log


def first_report(log: str) -> str:
    """The first line of the tool's first error report (``Invalid __global__ write of size 1 bytes``,
    with the kernel it was in), or a stand-in when the log has none."""
    lines = [re.sub(r"^=+\s?", "", line).strip() for line in log.splitlines() if line.startswith("=")]
    for i, line in enumerate(lines):
        if line and not line.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY")) and not line.startswith("at "):
            where = next((n for n in lines[i + 1:i + 3] if n.startswith("at ")), "")
            return f"{line} ({where})" if where else line
    return "compute-sanitizer reported errors (its log was unreadable)"
