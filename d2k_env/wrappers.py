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
