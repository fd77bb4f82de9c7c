"""d2k-env: expert-guided Triton kernel tasks as Gymnasium environments.

``import d2k_env`` registers ``D2K/<task_id>-v0`` for every shipped task and every task of the
directories in ``D2K_TASKS_PATH``, without importing torch or Triton (``gym.make`` imports them).
``gym.make("d2k_env:D2K/<task_id>-v0")`` imports this package itself first.
"""

import os

from d2k_env.registration import env_id, register_all

__version__ = "0.1.0"

if "D2K_WORKER_ROLE" not in os.environ:  # an evaluation worker makes no env, and its view holds no task directory
    register_all()

__all__ = ["env_id", "register_all", "__version__"]
