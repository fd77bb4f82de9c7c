"""Gymnasium conventions (issue 14, item 4): async vector envs with default arguments, the step budget
gym.make sets, copies of an env (pickle, cloudpickle, deepcopy) that own their workspace, replay
wrapped as gym.make wraps, and a state that stays small and round-trips through JSON."""

import copy
import json
import pickle
import time

import cloudpickle
import gymnasium as gym
import pytest

import d2k_env  # noqa: F401 - registers the environments
from d2k_env.env import KernelEnv, replay
from d2k_env.episode_state import EpisodeState

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


def _copy_by(how, env):
    if how == "pickle":
        return pickle.loads(pickle.dumps(env))
    if how == "cloudpickle":
        return cloudpickle.loads(cloudpickle.dumps(env))
    return copy.deepcopy(env)


@pytest.mark.parametrize("how", ["pickle", "cloudpickle", "deepcopy"])
def test_a_copy_mid_episode_owns_its_workspace_and_goes_on_from_the_same_point(how):
    # A cloudpickled copy shared the original's workspace (closing it deleted the original's files);
    # deepcopy and pickle failed on the task's module object.
    env = gym.make(ENV_ID, backend="interpreter", max_episode_steps=5)
    env.reset(seed=0)
    env.step(json.dumps({"tool": "write_file", "args": {"path": "notes/a.py", "content": "A = 1\r\n\u00b5 = 2\n"}}))
    env.step(LIST)
    twin = _copy_by(how, env)
    try:
        ours, theirs = env.unwrapped, twin.unwrapped
        assert theirs.workspace.root != ours.workspace.root
        assert theirs.workspace.texts() == ours.workspace.texts() and theirs.state() == ours.state()
        assert theirs.np_random.integers(1 << 62) == ours.np_random.integers(1 << 62)
        assert theirs.render() == ours.render() and twin.spec == env.spec
        twin.step(json.dumps({"tool": "str_replace", "args": {"path": "notes/a.py", "old": "A = 1", "new": "A = 9"}}))
        assert ours.workspace.read("notes/a.py").startswith("A = 1")
        *_, truncated, info = twin.step(LIST)
        assert info["steps"] == 4 and not truncated
        *_, truncated, _ = twin.step(LIST)
        assert truncated  # the copy's TimeLimit counted the original's steps too
        twin.close()
        assert ours.workspace.read("notes/a.py") == "A = 1\r\n\u00b5 = 2\n"  # closing the copy left ours alone
        assert env.step(LIST)[4]["steps"] == 3
    finally:
        twin.close()
        env.close()


def test_an_env_before_reset_and_after_close_copies_too():
    env = KernelEnv("fused_add_rmsnorm", backend="interpreter", max_steps=7)
    for twin in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        assert twin.workspace is None and twin.max_steps == 7
        prompt, info = twin.reset(seed=0)
        assert info["max_steps"] == 7
        twin.close()
    env.close()


def test_replay_returns_an_env_wrapped_as_gym_make_wraps_it():
    env = gym.make(ENV_ID, backend="interpreter", max_episode_steps=4)
    env.reset(seed=2)
    env.step(LIST)
    again = replay(env.unwrapped.state())
    try:
        assert type(again.unwrapped) is KernelEnv and again.spec.max_episode_steps == 4
        assert again.spec.additional_wrappers == env.spec.additional_wrappers
        wrappers = []
        inner = again
        while isinstance(inner, gym.Wrapper):
            wrappers.append(type(inner).__name__)
            inner = inner.env
        assert "TimeLimit" in wrappers and "OrderEnforcing" in wrappers
        assert again.unwrapped.state() == env.unwrapped.state()
        for _ in range(2):
            assert not again.step(LIST)[3]
        assert again.step(LIST)[3]  # the replayed step counted in the TimeLimit
    finally:
        again.close()
        env.close()


def test_the_state_stays_small_over_many_large_writes_and_replays():
    # 350 writes of 300 KB, each a little different, made state() 110 MB: every version kept whole.
    env = KernelEnv("fused_add_rmsnorm", backend="interpreter")
    env.reset(seed=0)
    lines = [f"x_{i} = {i}  # a line of a long solution.py, long enough to be typical: {'-' * 20}\n"
             for i in range(3300)]
    for version in range(60):
        lines[(version * 37) % len(lines)] = f"edited_{version} = True\n"
        content = "".join(lines)
        env.step(json.dumps({"tool": "write_file", "args": {"path": "solution.py", "content": content}}))
    state = env.state()
    size = len(json.dumps(state.to_json() if isinstance(state, EpisodeState) else state))
    assert len(content) > 290_000 and size < 3 * len(content), f"state() is {size} characters"
    loaded = EpisodeState.from_json(json.loads(json.dumps(state.to_json())))
    assert loaded == state and loaded.file_texts()["solution.py"] == content
    again = replay(loaded)
    try:
        assert again.unwrapped.workspace.read("solution.py") == content
        assert again.unwrapped.state() == state
    finally:
        again.close()
        env.close()


def test_the_text_space_allows_printable_unicode_and_still_samples_and_flattens():
    from gymnasium.spaces.utils import flatten, unflatten

    from d2k_env.text_space import UnicodeText

    space = UnicodeText(40)
    assert space.contains("t = 3  # 3500 \u00b5s \u2264 4\tms\n") and not space.contains("\x1b") \
        and not space.contains("\U0001f600") and not space.contains("x" * 41)
    assert len(pickle.dumps(space)) < 2000 and pickle.loads(pickle.dumps(space)) == space
    space.seed(0)
    assert space.contains(space.sample()) and unflatten(space, flatten(space, "a\u00b5")) == "a\u00b5"


@pytest.mark.parametrize("edit", [
    lambda lines: [x for pair in zip(lines, [f"# note {i}\n" for i in range(len(lines))]) for x in pair],
    lambda lines: lines[::-1], lambda lines: lines[30_000:] + lines[:30_000], lambda lines: ["\n"] * len(lines),
], ids=["comment-after-every-line", "reversed", "moved", "blanked"])
def test_the_blob_store_rebuilds_any_rewrite_in_linear_time(edit):
    # An LCS delta took minutes for a comment added after each of 100,000 lines; a step must not wait.
    from d2k_env.blob_store import BlobStore, key_of

    lines = [f"x_{i} = {i}\n" for i in range(100_000)]
    store = BlobStore()
    first = store.put("".join(lines))
    started = time.perf_counter()
    second = store.put("".join(edit(lines)))
    assert time.perf_counter() - started < 10
    again = BlobStore.from_table(json.loads(json.dumps(store.table())))
    assert again.get(second) == "".join(edit(lines)) and again.get(first) == "".join(lines)
    assert key_of(again.get(second)) == second
