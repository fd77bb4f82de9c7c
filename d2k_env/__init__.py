"""d2k-env: expert-guided Triton kernel tasks as Gymnasium environments.

``import d2k_env`` registers ``D2K/<task_id>-v0`` for every task under ``tasks/``.
"""

from d2k_env.registration import env_id, register_all

__version__ = "0.1.0"

register_all()

__all__ = ["env_id", "register_all", "__version__"]
