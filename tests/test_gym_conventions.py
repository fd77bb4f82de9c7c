"""Gymnasium conventions (issue 14, item 4): async vector envs with default arguments, the step budget
gym.make sets, copies of an env (pickle, cloudpickle, deepcopy) that own their workspace, replay
wrapped as gym.make wraps, and a state that stays small and round-trips through JSON."""

import gymnasium as gym

import d2k_env  # noqa: F401 - registers the environments
from d2k_env.env import KernelEnv

ENV_ID = "D2K/fused_add_rmsnorm-v0"


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
