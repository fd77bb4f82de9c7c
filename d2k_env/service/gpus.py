"""The GPUs an evaluation service may use; the leases on them that hold across processes are
:mod:`d2k_env.evaluator.gpu_lease`'s (re-exported here).

A timed evaluation must have its GPU to itself: another kernel running beside it would change the
time it reports. Within one service the scheduler sees to that; between services (each env of an
async vector env runs in its own process, with its own service), envs and ``d2k eval`` the lease
does: an ``flock`` on one file per physical GPU, exclusive for a timed evaluation, shared for
correctness-only work, dropped by the kernel when its holder dies.
"""

from __future__ import annotations

import os

from d2k_env.evaluator.gpu_lease import GpuLease, lock_directory, physical_gpu

__all__ = ["GpuLease", "lock_directory", "physical_gpu", "visible_gpus"]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as the driver names them in ``CUDA_VISIBLE_DEVICES``: that
    variable's entries where it is set, else ``0`` .. ``n-1`` for the n devices torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [name.strip() for name in listed.split(",") if name.strip()]
    import torch
    return [str(i) for i in range(torch.cuda.device_count())]
