"""Gymnasium conventions (issue 14, item 4): async vector envs with default arguments, the step budget
gym.make sets, copies of an env (pickle, cloudpickle, deepcopy) that own their workspace, replay
wrapped as gym.make wraps, and a state that stays small and round-trips through JSON."""

import gymnasium as gym
import pytest

import d2k_env  # noqa: F401 - registers the environments
from d2k_env.env import KernelEnv

ENV_ID = "D2K/fused_add_rmsnorm-v0"
LIST = '{"tool": "list_files", "args": {}}'


def test_async_vector_env_with_default_arguments_returns_the_prompts():
    # Shared memory is the default: a Text buffer read once gave 200,000 tabs for every observation.
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="async", backend="interpreter")
    try:
        observations, infos = envs.reset(seed=1)
        single = KernelEnv("fused_add_rmsnorm", backend="interpreter")
        prompt, _ = single.reset(seed=1)
        single.close()
        assert list(observations) == [prompt, prompt]
        assert all(envs.single_observation_space.contains(o) for o in observations)
        observations, *_ = envs.step(['{"tool": "list_files", "args": {}}', '{"tool": "read_file", "args": {"path": "x"}}'])
        assert "solution.py" in observations[0] and observations[1].startswith("ERROR: no file 'x'")
    finally:
        envs.close()


def _prompt_budget(prompt):
    return int(prompt.split("## Budget and reward\nAt most ", 1)[1].split(" steps", 1)[0])


@pytest.mark.parametrize("make_kwargs, budget", [
    ({"max_episode_steps": 3}, 3),  # the prompt and info said 350 while the episode ended at 3
    ({"max_episode_steps": 500}, 500),
    ({}, 350),
    ({"max_steps": 4}, 4),
    ({"max_steps": 4, "max_episode_steps": 6}, 4),
    ({"max_episode_steps": -1, "max_steps": 5}, 5),  # no TimeLimit: the env's own budget
])
def test_the_budget_stated_is_the_one_that_ends_the_episode(make_kwargs, budget):
    env = gym.make(ENV_ID, backend="interpreter", **make_kwargs)
    try:
        prompt, info = env.reset(seed=0)
        assert _prompt_budget(prompt) == budget and info["max_steps"] == budget
        if budget > 10:
            return
        for step in range(1, budget + 1):
            _, _, terminated, truncated, info = env.step(LIST)
            assert truncated == (step == budget) and not terminated and info["max_steps"] == budget
    finally:
        env.close()


def test_make_vec_passes_the_budget_to_every_env():
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", backend="interpreter", max_episode_steps=2)
    try:
        prompts, infos = envs.reset(seed=0)
        assert [_prompt_budget(p) for p in prompts] == [2, 2] and list(infos["max_steps"]) == [2, 2]
    finally:
        envs.close()
