"""Registers one Gymnasium id per task: ``D2K/<task_id>-v0``."""

from __future__ import annotations

import gymnasium as gym

from d2k_env.env import MAX_STEPS
from d2k_env.task import task_ids


def env_id(task_id: str) -> str:
    return f"D2K/{task_id}-v0"


def register_all() -> list[str]:
    """Register every task found under ``tasks/`` (idempotent); returns the ids."""
    ids = []
    for task_id in task_ids():
        gid = env_id(task_id)
        if gid not in gym.registry:
            gym.register(id=gid, entry_point="d2k_env.env:KernelEnv", kwargs={"task_id": task_id},
                         max_episode_steps=MAX_STEPS, nondeterministic=True)
        ids.append(gid)
    return ids
