"""Red-team attacks on the environment layer (episode, tools, workspace, reward bookkeeping,
observation/info, trajectories and replay, chat glue), not on the evaluator's checks.

Every test asserts the *defended* behaviour. The round found ten holes, all closed since: steps
after the budget ran out were still evaluated and paid; the evaluator followed a solution.py link
(or blocked on a pipe); paths thousands of directories deep raised RecursionError out of step() and
left an env that could not reset; a mapping whose methods raise escaped step(); a dict action with
a tuple was recorded as a different action than the one taken; a replay of an unsubmitted episode
submitted; held-out workloads made every timed submission's recorded speedup None; and a tool
call's arguments could carry a second "tool" key that replaced the tool.

Most tests replace ``Evaluator.evaluate`` with a stub (bookkeeping needs no real evaluation); the
few real evaluations use the CPU interpreter on the smoke workloads, or sources the static policy
rejects before any process starts.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

import d2k_env
from conftest import call
from d2k_env.agents.base import PolicyError
from d2k_env.env import KernelEnv, replay
from d2k_env.evaluator import EvalResult, Evaluator, WorkloadResult
from wrong_edits import wrong_solution

TASK = "fused_add_rmsnorm"
ROOT = Path(__file__).resolve().parent.parent


# -- helpers ---------------------------------------------------------------------------------------
class FakeEvaluations:
    """Replaces Evaluator.evaluate: records every call and answers 'correct' (reward 1 on submit)."""

    def __init__(self, correct=True):
        self.calls = []
        self.correct = correct

    def __call__(self, evaluator, path, mode="test", workloads=None, seed=None):
        self.calls.append({"mode": mode, "seed": seed, "path": str(path), "workloads": workloads,
                           "source": Path(path).read_text(errors="replace")})
        return EvalResult(mode, "interpreter", [WorkloadResult("w", self.correct, "stub verdict")])


@pytest.fixture
def fake(monkeypatch):
    f = FakeEvaluations()
    monkeypatch.setattr(Evaluator, "evaluate", lambda self, *args, **kwargs: f(self, *args, **kwargs))
    return f


@pytest.fixture
def env():
    e = KernelEnv(TASK, backend="interpreter")
    e.reset(seed=0)
    yield e
    e.close()


def _in_obs_space(env, obs):
    return env.observation_space.contains(obs)


def _rm_rf(path):
    """Remove a tree no matter how deep (shutil.rmtree recurses and fails on very deep trees)."""
    subprocess.run(["rm", "-rf", str(path)], check=False)


# -- reward bookkeeping ------------------------------------------------------------------------------
def test_only_one_submit_is_rewarded_and_nothing_else_is(env, fake):
    for action in (call("list_files"), call("read_file", path="baseline.py"), call("run_tests"),
                   call("benchmark"), call("profile", workload="3x1000"),
                   call("write_file", path="solution.py", content="x = 1\n"), "garbage"):
        _, reward, terminated, truncated, _ = env.step(action)
        assert reward == 0.0 and not terminated and not truncated
    _, reward, terminated, _, _ = env.step(call("submit"))
    assert reward == 1.0 and terminated
    evaluations = len(fake.calls)
    for _ in range(3):  # more submits, and any other tool, after the end
        obs, reward, terminated, _, info = env.step(call("submit"))
        assert reward == 0.0 and terminated and info.get("error") == "episode already ended"
    assert len(fake.calls) == evaluations  # nothing evaluated after the end


def test_no_reward_after_the_budget_is_spent(fake):
    env = gym.make(d2k_env.env_id(TASK), backend="interpreter", max_steps=2, max_episode_steps=2)
    env.reset(seed=0)
    env.step(call("list_files"))
    _, _, _, truncated, _ = env.step(call("list_files"))
    assert truncated
    try:
        _, reward, _, _, info = env.step(call("submit"))  # a loop that ignores `truncated`
        assert reward == 0.0, f"submit on step {info['steps']} of a {info['max_steps']}-step budget earned {reward}"
        assert not fake.calls, "the solution was evaluated after the budget ended"
    finally:
        env.close()


def test_actions_cannot_change_budget_guidance_or_reward_kind(env, fake):
    for action in ({"tool": "list_files", "args": {}, "max_steps": 10_000},
                   {"tool": "list_files", "args": {"max_steps": 10_000}},
                   {"tool": "submit", "args": {"reward": "binary"}},
                   {"tool": "run_tests", "args": {"seed": 1}},
                   {"tool": "benchmark", "args": {"workloads": ["3x1000"], "seed": 7}},
                   {"tool": "list_files", "options": {"guidance": "none"}}):
        obs, reward, terminated, _, info = env.step(action)
        assert obs.startswith("ERROR") and reward == 0.0 and not terminated
    assert env.max_steps == 350 and env._episode_layers == ("L1", "L2", "L3") and env.reward_kind == "speedup"
    assert not fake.calls


def test_close_then_step_is_a_clear_error_and_reset_recovers(fake):
    env = KernelEnv(TASK, backend="interpreter")
    env.reset(seed=0)
    env.close()
    with pytest.raises(gym.error.ResetNeeded):
        env.step(call("submit"))
    with pytest.raises(gym.error.ResetNeeded):
        env.state()
    env.close()  # twice is fine
    env.reset(seed=1)
    assert env.step(call("list_files"))[1] == 0.0
    env.close()
    assert not fake.calls


def test_many_resets_without_close_leak_no_episode_directories(fake):
    env = KernelEnv(TASK, backend="interpreter")
    roots = []
    for seed in range(15):
        env.reset(seed=seed)
        roots.append(Path(env._episode_dir.name))
        env.step(call("write_file", path=f"notes/{seed}.md", content="x" * 1000))
    assert [r for r in roots[:-1] if r.exists()] == []
    env.close()
    assert not roots[-1].exists()


# -- secrets: seeds and held-out shapes ------------------------------------------------------------------
def test_submit_seed_is_fresh_even_when_reset_seed_is_reused(fake):
    env = KernelEnv(TASK, backend="interpreter")
    seen = []
    for _ in range(3):
        obs, info = env.reset(seed=0)
        o1, *_, i1 = env.step(call("run_tests"))
        o2, *_, i2 = env.step(call("submit"))
        seen.append((fake.calls[-2]["seed"], fake.calls[-1]["seed"], obs + o1 + o2 + json.dumps([info, i1, i2])))
    test_seeds = {s[0] for s in seen}
    submit_seeds = [s[1] for s in seen]
    assert len(test_seeds) == 1  # run_tests inputs follow the public reset seed (not secret, by design)
    assert len(set(submit_seeds)) == 3 and not set(submit_seeds) & test_seeds
    for _, secret, text in seen:
        assert str(secret) not in text
    env.close()


def test_real_evaluations_do_not_leak_seeds_or_heldout_shapes_before_submit(tmp_path):
    """Two real interpreter evaluations (a few seconds each) of a policy-clean but wrong kernel."""
    seeds = []
    original = Evaluator.evaluate

    def spy(self, path, mode="test", workloads=None, seed=None):
        seeds.append(seed)
        return original(self, path, mode, workloads, seed)

    env = KernelEnv(TASK, backend="interpreter")
    prompt, _ = env.reset(seed=0)
    env.step(call("write_file", path="solution.py",
                  content=wrong_solution("fused_add_rmsnorm_no_weight", tmp_path).read_text()))
    mp = pytest.MonkeyPatch()
    mp.setattr(Evaluator, "evaluate", spy)
    try:
        o1, r1, t1, _, i1 = env.step(call("run_tests"))
        before_submit = prompt + o1 + json.dumps(i1)
        o2, r2, t2, _, i2 = env.step(call("submit"))
    finally:
        mp.undo()
        env.close()
    assert r1 == 0.0 and not t1 and r2 == 0.0 and t2
    assert "held-out" not in o1 + json.dumps(i1) and all(str(s) not in before_submit + o2 + json.dumps(i2) for s in seeds)
    assert any(w["name"].startswith("held-out") for w in i2["evaluation"]["workloads"])  # shown only after submit


# -- evaluation caching / what is evaluated ------------------------------------------------------------
def test_a_changed_file_is_evaluated_anew_never_a_cached_result(env):
    """The static policy rejects both files before any process starts, so this is fast."""
    nested = "import triton\n\n\ndef make():\n    @triton.jit\n    def alpha(p):\n        pass\n"
    env.step(call("write_file", path="solution.py", content=nested))
    o1, *_ = env.step(call("run_tests"))
    assert "'alpha'" in o1
    env.step(call("str_replace", path="solution.py", old="alpha", new="beta"))
    o2, reward, terminated, _, _ = env.step(call("submit"))
    assert "'beta'" in o2 and "'alpha'" not in o2 and reward == 0.0 and terminated


def test_a_planted_solution_symlink_is_not_evaluated(env, tmp_path):
    outside = tmp_path / "elsewhere.py"  # stands in for references/<task>.py
    outside.write_text("import os  # outside the workspace\n")
    ws = env.workspace.root
    os.unlink(ws / "solution.py")
    os.symlink(outside, ws / "solution.py")
    obs, *_ = env.step(call("read_file", path="solution.py"))
    assert "outside the workspace" in obs  # the tools refuse it...
    obs, reward, *_ = env.step(call("run_tests"))
    assert reward == 0.0
    assert "forbidden-import" not in obs, "the evaluator read and checked the file the symlink points to"


def test_a_planted_fifo_solution_does_not_block_step(env):
    ws = env.workspace.root
    os.unlink(ws / "solution.py")
    os.mkfifo(ws / "solution.py")

    def unblock():  # were step() to block reading the pipe, this ends it, so the test never hangs
        time.sleep(2.0)
        try:
            os.close(os.open(ws / "solution.py", os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader (step() did not block), or the workspace is already gone
            pass

    unblocker = threading.Thread(target=unblock, daemon=True)
    unblocker.start()
    start = time.monotonic()
    obs, reward, *_ = env.step(call("run_tests"))
    elapsed = time.monotonic() - start
    unblocker.join()
    assert reward == 0.0 and "must be a regular file" in obs, obs
    assert elapsed < 1.5, f"step() blocked {elapsed:.1f} s on a FIFO"


def test_a_solution_that_is_a_directory_scores_zero_without_raising(env):
    ws = env.workspace.root
    os.unlink(ws / "solution.py")
    os.mkdir(ws / "solution.py")
    obs, reward, terminated, _, info = env.step(call("submit"))
    assert reward == 0.0 and terminated and "FAILED" in obs and _in_obs_space(env, obs)


# -- workspace and path tricks ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", [
    "/etc/passwd", "../workspace/../../x.py", "..", ".", "solution.py/../../x", "\x00", "sol\x00ution.py",
    "\ud800.py", "x" * 300, "a/" * 2100 + "x", "./baseline.py", "baseline.py/x", "baseline.py/.",
    "../triton-cache/x", "..\\..\\x.py", "", " ", "\t\n",
])
def test_path_tricks_are_refused_or_stay_inside(env, path, fake):
    ws = env.workspace.root
    baseline = (ws / "baseline.py").read_text()
    outside_before = set(os.listdir(ws.parent))
    for action in ({"tool": "write_file", "args": {"path": path, "content": "pwned"}},
                   {"tool": "read_file", "args": {"path": path}},
                   {"tool": "str_replace", "args": {"path": path, "old": "def", "new": "pwned"}}):
        obs, reward, terminated, _, _ = env.step(action)
        assert reward == 0.0 and not terminated and _in_obs_space(env, obs)
    assert (ws / "baseline.py").read_text() == baseline
    assert set(os.listdir(ws.parent)) == outside_before


def test_read_file_cannot_reach_the_reference_or_the_package(env):
    ws = env.workspace.root
    for target in (ROOT / "references" / f"{TASK}.py", ROOT / "d2k_env" / "env.py", ROOT / "tasks" / f"{TASK}.py"):
        rel = os.path.relpath(target, ws)
        obs, *_ = env.step(call("read_file", path=rel))
        assert "outside the workspace" in obs
    obs, *_ = env.step(call("list_files"))
    assert "reference" not in obs and "triton-cache" not in obs


def test_a_very_deep_path_does_not_escape_step(env):
    escaped = None
    try:
        obs, reward, *_ = env.step(call("write_file", path="d/" * 1990 + "x.py", content="x"))
    except RecursionError as exc:
        escaped = exc
    assert escaped is None, "RecursionError escaped step()"


def test_a_deep_directory_tree_keeps_the_env_usable_and_is_cleaned_up():
    env = KernelEnv(TASK, backend="interpreter")
    env.reset(seed=0)
    episode = Path(env._episode_dir.name)
    failures = []
    try:
        for depth in (600, 1200):  # deeper than any recursive walk or removal could follow
            obs, *_ = env.step(call("write_file", path="a/" * depth + "x.py", content="x"))
            assert obs.startswith("ERROR") and "components deep" in obs, obs
        obs, *_ = env.step(call("write_file", path="a/" * 15 + "x.py", content="x"))  # the deepest allowed
        assert obs.startswith("Wrote"), obs
        for what, action in (("list_files", lambda: env.step(call("list_files"))), ("state", env.state),
                             ("reset", lambda: env.reset(seed=1))):
            try:
                action()
            except RecursionError:
                failures.append(what)
        if episode.exists():
            failures.append("the old episode directory is still on disk")
    finally:
        _rm_rf(episode)
        try:
            env.close()
        except RecursionError:
            pass
        if env._episode_dir is not None:
            _rm_rf(env._episode_dir.name)
            env._episode_dir.cleanup()
            env._episode_dir = None
    assert not failures, failures


# -- malformed actions -------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", [
    "[" * 200_000, "{" * 50_000, '{"tool": "read_file", "args": {"path": "solution.py", "start": ' + "9" * 5000 + "}}",
    "x" * 2_000_001, '{"tool": "read_file", "args": {"path": "solution.py", "start": 2, "end": 1}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": true}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": 1.0}}',
    '{"tool": "read_file", "args": {"path": "solution.py", "start": 1000000001}}',
    '{"tool": "write_file", "args": {"path": "solution.py", "content": null}}',
    '{"tool": "write_file", "args": {"path": ["solution.py"], "content": "x"}}',
    '{"tool": "benchmark", "args": {"workloads": [1, 2]}}', '{"tool": "benchmark", "args": {"workloads": "3x1000"}}',
    '{"tool": "submit", "args": []}', '{"tool": "submit", "args": "now"}', '{"tool": ["submit"]}',
    '{"tool": "__init__"}', '{"tool": "_evaluate", "args": {"mode": "submit"}}', '{"args": {}}', "null", "[]", "1e999",
    json.dumps({"tool": "write_file", "args": {"path": "solution.py", "content": "\u00e9" * 600_000}}, ensure_ascii=False),
    {"tool": "read_file", "args": {"path": "solution.py", 1: 2}}, {"tool": "benchmark", "args": {"workloads": None}},
    {"tool": "read_file", "args": {"path": b"solution.py"}}, {"tool": "list_files", "args": {"x": float("nan")}},
])
def test_malformed_actions_are_ordinary_steps(env, fake, action):
    before = env.workspace.read("solution.py")
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == 0.0 and not terminated and _in_obs_space(env, obs)
    assert env.workspace.read("solution.py") == before
    json.dumps(env.state().to_json())  # the record stays JSON


def test_self_referencing_and_deeply_nested_dict_actions(env, fake):
    cyclic = {"tool": "list_files", "args": {}}
    cyclic["args"]["self"] = cyclic
    deep = {"tool": "list_files", "args": {}}
    node = deep["args"]
    for _ in range(50_000):
        node["x"] = {}
        node = node["x"]
    for action in (cyclic, deep):
        obs, reward, terminated, *_ = env.step(action)
        assert obs.startswith("ERROR") and reward == 0.0 and not terminated
    json.dumps(env.state().to_json())


def test_a_dict_action_that_fails_to_serialise_does_not_escape_step(env):
    class Hostile(dict):
        def items(self):
            raise RuntimeError("serialisation failed")

    escaped = None
    try:
        env.step(Hostile(tool="list_files"))
    except RuntimeError as exc:
        escaped = exc
    assert escaped is None


def test_str_replace_edge_cases_leave_files_intact(env):
    env.step(call("write_file", path="solution.py", content="A = 1\nA = 1\nB = 2\n"))
    for args in ({"old": "A = 1", "new": "x"}, {"old": "", "new": "x"}, {"old": "Z", "new": "x"},
                 {"old": "B = 2", "new": "y" * 1_000_001}):
        obs, *_ = env.step({"tool": "str_replace", "args": {"path": "solution.py", **args}})
        assert obs.startswith("ERROR")
        assert env.workspace.read("solution.py") == "A = 1\nA = 1\nB = 2\n"
    obs, *_ = env.step({"tool": "str_replace", "args": {"path": "baseline.py", "old": "def", "new": "pwned"}})
    assert "read-only" in obs


def test_non_utf8_content_round_trips_through_state_and_replay(env, fake):
    env.step({"tool": "write_file", "args": {"path": "solution.py", "content": "x = '\udcff\ud800'\n"}})
    env.step({"tool": "write_file", "args": {"path": "notes/\u2603.md", "content": "snow"}})
    state = json.loads(json.dumps(env.state().to_json()))
    again = replay(state)
    try:
        assert again.unwrapped.state().files == state["files"]
    finally:
        again.close()


# -- replay and trajectories -------------------------------------------------------------------------------
def test_replay_takes_exactly_the_recorded_actions(env, fake):
    obs, *_ = env.step({"tool": "benchmark", "args": {"workloads": ("3x1000",)}})
    original_evaluations = len(fake.calls)
    again = replay(env.state())
    try:
        assert len(fake.calls) - original_evaluations == original_evaluations, \
            "replay evaluated the solution where the original episode did not"
        assert again.unwrapped._last_observation == obs
    finally:
        again.close()


def test_replaying_a_trajectory_never_adds_a_submit(tmp_path):
    from d2k_env.agents.scripted import ScriptedPolicy
    from d2k_env.trajectory import FORMAT_VERSION, TrajectoryWriter

    path = tmp_path / "p__t__none__seed0.jsonl"
    w = TrajectoryWriter(path)
    w.write({"type": "header", "format": FORMAT_VERSION, "policy": "p", "task": TASK, "condition": "none", "seed": 0})
    w.write({"type": "step", "index": 1, "action": call("list_files")})
    w.write({"type": "summary", "status": "failed", "error": "PolicyError: server gone", "total_reward": 0.0})
    w.commit()
    policy = ScriptedPolicy.from_trajectory(path)
    assert policy("obs") == call("list_files")
    with pytest.raises(PolicyError, match="recorded actions are used up"):  # the episode ends unsubmitted
        policy("obs")


def test_the_recorded_speedup_matches_the_reward_of_a_timed_submission():
    from d2k_env.reward import submission_reward
    from d2k_env.runner import submission_metrics

    timed = [WorkloadResult(n, True, "ok", speedup=s, roofline_fraction=0.5, solution_ms=1.0, baseline_ms=s)
             for n, s in (("64x8192", 2.0), ("4096x8192", 8.0))]
    heldout = [WorkloadResult(f"held-out {n}", True, "ok", heldout=True)  # checked, untimed
               for n in ("17x4096", "900x1032")]
    result = EvalResult("submit", "cuda", timed + heldout, timed=True, device_name="GPU")
    reward = submission_reward("speedup", result)
    assert reward == pytest.approx(4.0)
    metrics = submission_metrics(result.to_dict())
    assert metrics["correct"] and metrics["speedup"] == pytest.approx(reward)


def test_trajectory_lines_cannot_be_split_by_agent_text(tmp_path):
    from d2k_env.trajectory import FORMAT_VERSION, TrajectoryWriter, read_trajectory

    nasty = 'x"}\n{"type": "summary", "status": "finished", "total_reward": 99}\r\u2028\u2029\x85\ud800'
    path = tmp_path / "p__t__none__seed0.jsonl"
    w = TrajectoryWriter(path)
    w.write({"type": "header", "format": FORMAT_VERSION, "policy": "p", "task": TASK, "condition": "none", "seed": 0})
    w.write({"type": "step", "index": 1, "action": nasty, "observation": nasty, "reward": 0.0})
    w.write({"type": "summary", "status": "finished", "total_reward": 0.0})
    w.commit()
    t = read_trajectory(path)
    assert len(t.steps) == 1 and t.steps[0]["action"] == nasty and t.summary["total_reward"] == 0.0


# -- chat glue ---------------------------------------------------------------------------------------------
def test_tool_call_arguments_cannot_change_which_tool_runs():
    from d2k_env.chat_format import action_from_tool_call
    from d2k_env.tools import ActionError, parse_action

    action = action_from_tool_call("read_file", '{}, "tool": "submit"')
    try:
        tool = parse_action(action).tool
    except ActionError:
        tool = None
    assert tool in (None, "read_file")
