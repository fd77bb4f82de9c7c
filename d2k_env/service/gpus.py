"""The GPUs an evaluation service may use, and leases on them that hold across processes.

A timed evaluation must have its GPU to itself: another kernel running beside it would change the
time it reports. Within one service the scheduler sees to that; between services (each env of an
async vector env runs in its own process, with its own service) a lease is an ``flock`` on one file
per GPU: exclusive for a timed evaluation, shared for correctness-only work. The kernel drops it
when the holder dies, so a crashed process never leaves a GPU locked.

Processes share leases when they name their GPUs the same way: leave ``CUDA_VISIBLE_DEVICES`` unset
(physical indices) or give every process the same indices or UUIDs.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from pathlib import Path


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as the driver names them in ``CUDA_VISIBLE_DEVICES``: that
    variable's entries where it is set, else ``0`` .. ``n-1`` for the n devices torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [name.strip() for name in listed.split(",") if name.strip()]
    import torch
    return [str(i) for i in range(torch.cuda.device_count())]


def lock_directory() -> Path:
    """Where the lease files live: one directory per user, shared by every process of the machine."""
    path = Path(tempfile.gettempdir()) / f"d2k-gpu-leases-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


class GpuLease:
    """An ``flock`` on one GPU's lease file, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, gpu: str, exclusive: bool, directory: Path | None = None):
        self.gpu, self.exclusive = gpu, exclusive
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", gpu) or "default"
        self.path = (directory or lock_directory()) / f"gpu-{name}.lock"
        self._fd = -1

    def acquire(self) -> None:
        """Block until the lease is held."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the only descriptor of the open file drops the lock
            self._fd = -1

    def __enter__(self) -> "GpuLease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
