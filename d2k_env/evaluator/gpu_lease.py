"""Machine-wide leases on physical GPUs, held across processes by every timed phase.

A timed phase (a solution run that times the baseline and the candidate, or profiles) must have
its GPU to itself: another process's kernels running beside it slow whichever side they overlap,
and the speedup moves with them (three ``d2k eval --mode submit`` at once on one H100 doubled the
baseline's time, and the speedup with it). So every timed phase holds an *exclusive* lease on its
GPU, and every untimed phase that runs kernels (correctness runs, the check, the memory-checked
run) a *shared* one: untimed phases run side by side, never beside a timed one. Envs, evaluation
services and ``d2k eval`` take the same leases, whatever process they run in.

A lease is an ``flock`` on one file per physical GPU in one directory per user
(:func:`lock_directory`). The kernel drops it when its holder dies, so a killed process never
leaves a GPU locked. Each acquisition opens the file anew: flock conflicts between open files,
so threads of one process exclude each other as processes do. Linux grants a shared flock while
an exclusive one waits, so a stream of untimed phases could starve a timed one: a second file, the
turnstile, is held exclusively by a timed phase while it waits and briefly shared by an untimed
phase before it takes its lease, so that untimed phases queue behind a waiting timed one.

The file is named for the GPU's PCI bus id as the CUDA driver reports it, not for its index in
``CUDA_VISIBLE_DEVICES``: processes that see one GPU under different indices (or by UUID) take the
same lease. The id is asked of the driver in a short child process (no CUDA context in the caller,
which forks workers; the child sees the ``CUDA_VISIBLE_DEVICES`` the workers get). Where no driver
answers (a machine without a GPU), the name given stands in, marked as such.
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

RESOLVE_TIMEOUT_S = 60.0  # the driver's initialisation, on a loaded machine

# Runs in a child with the workers' CUDA_VISIBLE_DEVICES: the PCI bus id of the device they use (their
# first), straight from the driver (no torch: its import alone takes seconds).
_RESOLVE = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
dev, buf = ctypes.c_int(0), ctypes.create_string_buffer(64)
if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), 0) or cuda.cuDeviceGetPCIBusId(buf, 64, dev):
    sys.exit(3)
print(buf.value.decode())
"""


def lock_directory() -> Path:
    """Where the lease files live: one directory per user, shared by every process of the machine."""
    path = Path(tempfile.gettempdir()) / f"d2k-gpu-leases-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def _physical(visible: str | None, order: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    if order is not None:
        env["CUDA_DEVICE_ORDER"] = order
    try:
        done = subprocess.run([sys.executable, "-I", "-c", _RESOLVE], env=env, capture_output=True, text=True,
                              timeout=RESOLVE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        done = None
    bus = done.stdout.strip().lower() if done is not None and done.returncode == 0 else ""
    if re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", bus):
        return f"pci-{bus}"
    # No driver answered: the name is all there is (every process naming the GPU alike shares it).
    first = (visible or "").split(",")[0].strip()
    return f"visible-{first or 'default'}"


def physical_gpu(gpu: str | None = None) -> str:
    """The lease key of the GPU a worker with ``CUDA_VISIBLE_DEVICES=gpu`` uses (``gpu`` None: this
    process's own ``CUDA_VISIBLE_DEVICES``, whose first device a worker uses): ``pci-<bus id>`` from
    the driver, or ``visible-<name>`` where no driver answers. Asked once per name and process."""
    visible = gpu if gpu is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    return _physical(visible, os.environ.get("CUDA_DEVICE_ORDER"))


class GpuLease:
    """An ``flock`` on one GPU's lease file, held from :meth:`acquire` to :meth:`release`: exclusive
    for a timed phase, shared for an untimed one. ``key`` names the GPU (see :func:`physical_gpu`);
    ``waited_s`` is how long :meth:`acquire` waited."""

    def __init__(self, key: str, exclusive: bool, directory: Path | None = None):
        self.key, self.exclusive = key, exclusive
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", key) or "default"
        directory = Path(directory) if directory is not None else lock_directory()
        self.path, self._turnstile = directory / f"gpu-{name}.lock", directory / f"gpu-{name}.turnstile"
        self._fd = -1
        self.waited_s = 0.0

    def acquire(self) -> None:
        """Block until the lease is held (a shared one also waits for a timed phase already waiting)."""
        if self._fd >= 0:
            raise RuntimeError(f"the lease on {self.key} is already held by this GpuLease")
        started = time.monotonic()
        turnstile = _open(self._turnstile)
        try:
            fcntl.flock(turnstile, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
            fd = _open(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
            except BaseException:
                os.close(fd)
                raise
        finally:
            os.close(turnstile)  # the lease is held (or never will be): let the next one queue
        self._fd, self.waited_s = fd, time.monotonic() - started

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the only descriptor of the open file drops the lock
            self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def __enter__(self) -> "GpuLease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextmanager
def leased(key: str, exclusive: bool, phase: str, record: list[dict], directory: Path | None = None
           ) -> Iterator[GpuLease]:
    """Hold ``key``'s lease for ``phase``; appends to ``record`` what was held and for how long:
    ``{"phase", "gpu", "exclusive", "waited_s", "held_s"}``."""
    lease = GpuLease(key, exclusive, directory)
    lease.acquire()
    started = time.monotonic()
    try:
        yield lease
    finally:
        lease.release()
        record.append({"phase": phase, "gpu": key, "exclusive": exclusive, "waited_s": round(lease.waited_s, 3),
                       "held_s": round(time.monotonic() - started, 3)})
