"""Wrappers that change what the agent is shown, never how it is scored."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from d2k_env.env import parse_guidance


class GuidanceWrapper(gym.Wrapper):
    """Shows exactly the given guidance layers (any subset of L1, L2, L3; empty shows none).

    The layers are passed to the wrapped env's ``reset`` as ``options["guidance"]``, so the prompt,
    ``info["guidance"]`` and nothing else change; the reward is independent of guidance.
    """

    def __init__(self, env: gym.Env, layers: tuple[str, ...] | list[str] | str = ("L1", "L2", "L3")):
        super().__init__(env)
        self.layers = parse_guidance(layers)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        return self.env.reset(seed=seed, options={**(options or {}), "guidance": self.layers})


class StepBudget(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Tells the env the step budget of the ``TimeLimit`` beneath it, so that its prompt and
    ``info["max_steps"]`` state the budget that really ends the episode.

    Registration adds it outside the ``TimeLimit`` that ``gym.make`` applies (``max_episode_steps``,
    350 unless given), which the env itself cannot see. The budget becomes that limit, or the
    env's own ``max_steps`` when one was given and is smaller; without a ``TimeLimit``
    (``max_episode_steps=-1``) the env keeps its own. It changes nothing else.
    """

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        limit = env.spec.max_episode_steps if env.spec is not None else None
        if limit is not None:
            env.unwrapped.follow_time_limit(limit)
