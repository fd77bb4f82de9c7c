"""The Gymnasium contract, the tools, the episode budget and the guidance wrapper (CPU backend)."""

import json
import os

import gymnasium as gym
import pytest

import d2k_env
from conftest import TASK_IDS, call
from d2k_env.env import MAX_OBSERVATION_CHARS, KernelEnv, to_observation
from d2k_env.task import load_task
from d2k_env.wrappers import GuidanceWrapper


@pytest.fixture
def env():
    e = gym.make("D2K/fused_add_rmsnorm-v0", backend="interpreter")
    e.reset(seed=0)
    yield e
    e.close()


def test_every_task_is_registered_with_the_benchmark_budget():
    for task_id in TASK_IDS:
        spec = gym.spec(d2k_env.env_id(task_id))
        assert spec.max_episode_steps == 350 and spec.nondeterministic


def test_reset_is_deterministic_and_prompt_is_complete():
    env = gym.make("D2K/merge_attn_states-v0", backend="interpreter")
    a, info = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    assert a == b
    task = load_task("merge_attn_states")
    for needle in ("def forward(prefix_out, prefix_lse, suffix_out, suffix_lse)",  # baseline source
                   "bfloat16[8192, 128, 128]", "float32[128, 8192]",  # workload shapes and dtypes
                   "str_replace(path: string, old: string, new: string)", '{"tool": "read_file"',  # manual
                   "At most 350 steps", "layers shown: L1, L2, L3", task.guidance("L3")[:200]):
        assert needle in a, needle
    assert info["guidance"] == ["L1", "L2", "L3"] and info["steps"] == 0
    env.close()


def test_file_tools_round_trip(env):
    obs, reward, term, trunc, info = env.step(call("list_files"))
    assert "solution.py" in obs and "baseline.py" in obs and "[read-only]" in obs and reward == 0
    obs, *_ = env.step(call("read_file", path="solution.py"))
    assert "NotImplementedError" in obs
    env.step(call("write_file", path="solution.py", content="A = 1\nB = 2\nC = 3\n"))
    obs, *_ = env.step(call("read_file", path="solution.py", start=2, end=3))
    assert "B = 2" in obs and "C = 3" in obs and "A = 1" not in obs
    obs, *_ = env.step(call("str_replace", path="solution.py", old="B = 2", new="B = 20"))
    assert "line 2" in obs
    obs, *_ = env.step(call("read_file", path="solution.py"))
    assert "B = 20" in obs


def test_str_replace_requires_exactly_one_occurrence(env):
    env.step(call("write_file", path="solution.py", content="x = 1\nx = 1\n"))
    obs, *_ = env.step(call("str_replace", path="solution.py", old="x = 1", new="y"))
    assert "occurs 2 times" in obs
    obs, *_ = env.step(call("str_replace", path="solution.py", old="zzz", new="y"))
    assert "does not occur" in obs


def test_baseline_copy_is_read_only(env):
    obs, *_ = env.step(call("write_file", path="baseline.py", content="def forward(*a): pass"))
    assert "read-only" in obs
    obs, *_ = env.step(call("read_file", path="baseline.py"))
    assert "rsqrt" in obs


@pytest.mark.parametrize("action, expected", [
    ("not json at all", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"args": {}}', 'needs a "tool" key'),
    ('{"tool": "rm_rf", "args": {}}', "unknown tool 'rm_rf'"),
    ('{"tool": "read_file", "args": {}}', "needs argument(s) 'path'"),
    ('{"tool": "read_file", "args": {"path": 3}}', "'path' must be a string"),
    ('{"tool": "read_file", "args": {"path": "a", "start": 0}}', "'start' must be >= 1"),
    ('{"tool": "list_files", "args": {"x": 1}}', "takes no argument(s) 'x'"),
    ('{"tool": "list_files", "args": []}', '"args" must be a JSON object'),
    ("[" * 100000 + "]" * 100000, "not valid JSON"),
    ('{"tool": "benchmark", "args": {"workloads": ["nope"]}}', "unknown workload(s) ['nope']"),
])
def test_bad_actions_are_explained_not_raised(env, action, expected):
    obs, reward, terminated, truncated, info = env.step(action)
    assert expected in obs, obs
    assert reward == 0 and not terminated and "error" in info
    assert any(s in obs for s in ('{"tool": "<name>", "args": {...}}', "Usage: {", "unknown workload"))
    obs, *_ = env.step(call("list_files"))  # still usable
    assert "solution.py" in obs


@pytest.mark.parametrize("path", ["../escape.py", "/etc/passwd", "sub/../../escape.py", "link/x.py", "link2"])
def test_paths_outside_the_workspace_are_refused(env, path, tmp_path):
    ws = env.unwrapped.workspace.root
    os.symlink(tmp_path, ws / "link")
    os.symlink(tmp_path / "target.py", ws / "link2")
    for action in (call("write_file", path=path, content="pwned"), call("read_file", path=path)):
        obs, *_ = env.step(action)
        assert "outside the workspace" in obs or "absolute" in obs, obs
    assert list(tmp_path.iterdir()) == [] and not (ws.parent / "escape.py").exists()


def test_malformed_step_never_raises_on_odd_payloads(env):
    for action in ({"tool": None}, {"tool": "write_file", "args": {"path": "s.py", "content": "\udcff\u00e9"}},
                   json.dumps({"tool": "read_file", "args": {"path": "\x00"}}), "", "\u2603" * 10):
        obs, reward, *_ = env.step(action)
        assert env.unwrapped.observation_space.contains(obs) and reward == 0


def test_observations_are_clipped_with_a_note():
    long = "x" * (MAX_OBSERVATION_CHARS * 2)
    obs = to_observation(long)
    assert len(obs) <= MAX_OBSERVATION_CHARS and "characters clipped here" in obs
    assert to_observation("caf\u00e9\r\n\x1b\U0001f600") == "caf\u00e9\n\\x1b\\U0001f600"


def test_step_350_truncates(env):
    truncated = False
    for i in range(350):
        obs, reward, terminated, truncated, info = env.step(call("list_files"))
        assert not terminated
        assert truncated == (i == 349)
    assert info["steps"] == 350


def test_close_removes_the_workspace():
    env = gym.make("D2K/fused_add_rmsnorm-v0", backend="interpreter")
    env.reset(seed=0)
    root = env.unwrapped.workspace.root
    assert (root / "solution.py").is_file()
    env.reset(seed=1)
    assert not root.exists()  # a new episode gets a fresh workspace
    root = env.unwrapped.workspace.root
    env.close()
    assert not root.exists()


@pytest.mark.parametrize("layers", [(), ("L1",), ("L2",), ("L1", "L2"), ("L1", "L3"), ("L1", "L2", "L3")])
def test_guidance_wrapper_shows_exactly_the_chosen_layers(layers):
    task = load_task("per_token_group_quant_fp8")
    env = GuidanceWrapper(gym.make("D2K/per_token_group_quant_fp8-v0", backend="interpreter"), layers)
    obs, info = env.reset(seed=0)
    for layer in ("L1", "L2", "L3"):
        assert (task.guidance(layer) in obs) == (layer in layers), layer
    assert info["guidance"] == list(layers)
    assert f"layers shown: {', '.join(layers) or 'none'}" in obs
    env.close()


@pytest.mark.parametrize("spec, layers", [("none", ()), ("L1", ("L1",)), ("L1+L2", ("L1", "L2")),
                                          ("L1+L2+L3", ("L1", "L2", "L3")), ("l3+L1", ("L1", "L3"))])
def test_make_guidance_argument(spec, layers):
    env = gym.make("D2K/fused_add_rmsnorm-v0", backend="interpreter", guidance=spec)
    _, info = env.reset(seed=0)
    assert info["guidance"] == list(layers)
    env.close()


def test_bad_constructor_arguments_fail_loudly():
    with pytest.raises(ValueError, match="guidance"):
        KernelEnv("fused_add_rmsnorm", backend="interpreter", guidance="L4")
    with pytest.raises(ValueError, match="reward"):
        KernelEnv("fused_add_rmsnorm", backend="interpreter", reward="fast")
    with pytest.raises(ValueError, match="backend"):
        KernelEnv("fused_add_rmsnorm", backend="tpu")
    with pytest.raises(KeyError, match="unknown task"):
        KernelEnv("no_such_task")


def test_state_is_json_and_replays_to_the_same_workspace(env):
    from d2k_env.env import replay

    env.reset(seed=11)
    env.step(call("write_file", path="solution.py", content="A = 1\n"))
    env.step({"tool": "str_replace", "args": {"path": "solution.py", "old": "A = 1", "new": "A = 2"}})
    env.step(call("write_file", path="notes/plan.md", content="two-pass\n"))
    env.step("not json")
    state = json.loads(json.dumps(env.unwrapped.state().to_json()))
    assert state["steps"] == 4 and state["seed"] == 11 and len(state["actions"]) == 4
    again = replay(state)
    assert again.unwrapped.state().files == state["files"] and state["files"]["solution.py"] == "A = 2\n"
    assert again.unwrapped.state().actions == state["actions"]
    again.close()


def test_a_smaller_budget_is_stated_in_the_prompt_and_truncates():
    env = gym.make(d2k_env.env_id("merge_attn_states"), backend="interpreter", max_steps=3, max_episode_steps=3)
    obs, info = env.reset(seed=0)
    assert "At most 3 steps" in obs and info["max_steps"] == 3
    for step in range(1, 4):
        obs, reward, terminated, truncated, info = env.step(call("list_files"))
        assert truncated == (step == 3) and not terminated and info["max_steps"] == 3
    unwrapped = d2k_env.env.KernelEnv("merge_attn_states", backend="interpreter", max_steps=2)
    unwrapped.reset(seed=0)
    assert not unwrapped.step(call("list_files"))[3] and unwrapped.step(call("list_files"))[3]
    assert d2k_env.env.replay(unwrapped.state()).unwrapped.max_steps == 2
    unwrapped.close()
    env.close()


def test_a_harness_failure_during_an_evaluation_is_a_step_not_an_exception(monkeypatch):
    from d2k_env.evaluator import Evaluator

    def broken(self, *args, **kwargs):
        raise RuntimeError("simulated harness bug")

    env = gym.make(d2k_env.env_id("fused_add_rmsnorm"), backend="interpreter")
    env.reset(seed=0)
    monkeypatch.setattr(Evaluator, "evaluate", broken)
    obs, reward, terminated, truncated, info = env.step(call("submit"))
    assert terminated and reward == 0.0 and "harness error" in obs and "simulated harness bug" in obs
    env.close()


def test_read_file_shows_non_ascii_as_it_is_and_str_replace_takes_the_line_back(env):
    # Escaped as \xb5s, the line copied from read_file into str_replace did not occur.
    env.step(call("write_file", path="solution.py", content="t_ms = 3.5  # 3500 \u00b5s, \u2264 4 ms\n"))
    obs, *_ = env.step(call("read_file", path="solution.py"))
    assert "t_ms = 3.5  # 3500 \u00b5s, \u2264 4 ms" in obs and "escape" not in obs
    assert env.unwrapped.observation_space.contains(obs)
    line = obs.splitlines()[-1][len("    1  "):]
    obs, *_ = env.step(call("str_replace", path="solution.py", old=line, new="t_ms = 3.0"))
    assert obs.startswith("Replaced"), obs


def test_read_file_and_str_replace_explain_what_the_view_cannot_show(env):
    env.step(call("write_file", path="notes.py", content="a = 1\r\nb = 2\r\n# done \U0001f600\n"))
    obs, *_ = env.step(call("read_file", path="notes.py"))
    assert "    1  a = 1\n    2  b = 2\n    3  # done \\U0001f600" in obs and "CRLF" in obs and "escapes" in obs
    obs, *_ = env.step(call("str_replace", path="notes.py", old="a = 1\nb = 2", new="c = 3"))
    assert "does not occur" in obs and "CRLF" in obs
    obs, *_ = env.step(call("str_replace", path="notes.py", old="# done \\U0001f600", new="# ok"))
    assert "does not occur" in obs and "escapes" in obs
    obs, *_ = env.step(call("str_replace", path="notes.py", old="a = 1\r\nb = 2", new="c = 3"))
    assert obs.startswith("Replaced"), obs
