"""Registers one Gymnasium id per task: ``D2K/<task_id>-v0``.

Light on purpose: ``import d2k_env`` runs this, and it finds tasks by their file names only, so
registering every id imports neither torch nor Triton; ``gym.make`` imports the env (and them).
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from d2k_env.task import task_roots

MAX_STEPS = 350  # the D2K-Bench turn budget
# Outside gym.make's TimeLimit: it tells the env that limit (see d2k_env.wrappers.StepBudget).
STEP_BUDGET = WrapperSpec("StepBudget", "d2k_env.wrappers:StepBudget", {})


def env_id(task_id: str) -> str:
    # The id's version bumps when a change makes the task's old scores incomparable with new ones: a
    # scoring change (which also bumps d2k_env.reward.REWARD_VERSION; then every id bumps), or a change
    # to the task itself (workloads, inputs, tolerances, baseline, step budget; then that task's id).
    # Changes that leave every score as it was (new tools, clearer messages, new tasks) keep it.
    return f"D2K/{task_id}-v0"


def register_all() -> list[str]:
    """Register every task of every task directory (idempotent: call it again after changing
    ``D2K_TASKS_PATH``); returns the ids. A malformed task directory or a clash of ids is a
    warning naming the path, never an exception."""
    ids = []
    for task_id in sorted(task_roots(warn=True)):
        gid = env_id(task_id)
        if gid not in gym.registry:
            gym.register(id=gid, entry_point="d2k_env.env:KernelEnv", kwargs={"task_id": task_id},
                         max_episode_steps=MAX_STEPS, nondeterministic=True, additional_wrappers=(STEP_BUDGET,))
        ids.append(gid)
    return ids
