"""Design-only episodes (KernelEnv mode "design", issue 30): the agent reads the task and submits a
written design with submit_design; no kernel is written or run, the reward is 0, and the design is
in info["design"] for the judge. The chat policy in design mode sends the design tools."""

import copy
import json
import pickle

import gymnasium as gym
import pytest

from conftest import call
from d2k_env.env import KernelEnv, replay
from d2k_env.task import load_task
from d2k_env.tools import ActionError, function_schemas, parse_action
from mock_openai import MockChatServer

TASK = "fused_add_rmsnorm"


@pytest.fixture
def env():
    env = gym.make(f"D2K/{TASK}-v0", backend="interpreter", guidance="L1+L2", mode="design")
    yield env
    env.close()


def test_reset_shows_the_design_tools_and_no_property(env):
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info["mode"] == "design" and info["guidance"] == ["L1", "L2"]
    assert "design-only episode: you write no code and nothing is run" in obs
    assert "- submit_design(design: string)" in obs and "Tools: list_files, read_file, submit_design" in obs
    assert "run_tests" not in obs and "write_file" not in obs
    assert load_task(TASK).guidance("L2") in obs and load_task(TASK).guidance("L3") not in obs
    # The properties are what the judge grades: the prompt never lists them.
    assert not [p.id for p in load_task(TASK).spec.design_properties if p.id in obs or p.text in obs]
    assert sorted(env.unwrapped.workspace.texts()) == ["baseline.py"]  # no solution stub


def test_solution_tools_are_refused_and_the_episode_goes_on(env):
    env.reset(seed=0)
    for action in (call("write_file", path="solution.py", content="x"), call("run_tests"), call("submit")):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs.startswith("ERROR: unknown tool") and "belongs to solution episodes" in obs
        assert (reward, terminated, truncated) == (0.0, False, False) and info["error"]
    obs, *_ = env.step(call("read_file", path="baseline.py"))
    assert obs.startswith("baseline.py, lines 1-")
    assert sorted(env.unwrapped.workspace.texts()) == ["baseline.py"]


def test_an_empty_design_is_refused(env):
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(call("submit_design", design=" \n "))
    assert obs == "ERROR: submit_design needs the design itself: the design argument is empty"
    assert (reward, terminated, info["tool"]) == (0.0, False, "submit_design")
    obs, *_ = env.step(call("submit_design"))
    assert obs.startswith("ERROR: submit_design needs argument(s) 'design'")


def test_submit_design_ends_the_episode_unrewarded_with_the_design_in_info(env):
    env.reset(seed=0)
    design = "One program per row; the row is read once and kept in registers."
    obs, reward, terminated, truncated, info = env.step(call("submit_design", design=design))
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["design"] == design and info["tool"] == "submit_design" and "evaluation" not in info
    assert obs.startswith(f"Design submitted ({len(design)} characters).")
    obs, reward, terminated, _, info = env.step(call("list_files"))
    assert obs.startswith("The episode has ended (the design was submitted).") and terminated and reward == 0.0


def test_state_replay_and_copies_keep_the_mode(env):
    env.reset(seed=3)
    env.step(call("list_files"))
    for clone in (copy.deepcopy(env.unwrapped), pickle.loads(pickle.dumps(env.unwrapped))):
        assert clone.mode == "design"
        assert clone.step(call("submit_design", design="fused, one pass"))[2] is True
        clone.close()
    env.step(call("submit_design", design="fused, one pass"))
    state = env.unwrapped.state()
    assert state.mode == "design" and state.to_json()["mode"] == "design"
    again = replay(state.to_json())
    assert again.unwrapped.mode == "design" and again.unwrapped.state().terminated
    again.close()
    older = {k: v for k, v in state.to_json().items() if k != "mode"}  # a state from before modes: a solution one
    assert replay({**older, "actions": [], "files": {}, "steps": 0, "terminated": False}).unwrapped.mode == "solution"


def test_a_mode_of_neither_kind_is_refused():
    with pytest.raises(ValueError, match=r"mode must be one of \('solution', 'design'\), not 'plan'"):
        KernelEnv(TASK, backend="interpreter", mode="plan")


def test_a_solution_episode_refuses_submit_design():
    with pytest.raises(ActionError, match="in a solution episode \\(submit_design belongs to design episodes\\)"):
        parse_action(call("submit_design", design="x"))
    assert parse_action(call("submit_design", design="x"), "design").args == {"design": "x"}
    assert [f["function"]["name"] for f in function_schemas("design")] == ["list_files", "read_file", "submit_design"]


def test_the_chat_policy_in_design_mode_sends_the_design_tools(monkeypatch):
    from d2k_env.agents.openai_chat import ChatPolicy

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    reply = {"tool_calls": [("submit_design", {"design": "one kernel, one pass"})]}
    with MockChatServer(lambda body: reply) as server:
        policy = ChatPolicy(base_url=server.url, mode="design")
        env = gym.make(f"D2K/{TASK}-v0", backend="interpreter", mode="design")
        obs, _ = env.reset(seed=0)
        obs, reward, terminated, _, info = env.step(policy(obs))
        policy.close()
        env.close()
    body = server.requests[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["list_files", "read_file", "submit_design"]
    system = body["messages"][0]["content"]
    assert "submit_design" in system and "write solution.py" not in system
    assert terminated and info["design"] == "one kernel, one pass" and policy.describe()["mode"] == "design"
    with pytest.raises(ValueError, match="mode must be one of"):
        ChatPolicy(base_url=server.url, mode="plan")


def test_every_tasks_reference_design_is_a_valid_submit_design():
    from d2k_env.agents import reference_design_policy
    from d2k_env.task import task_ids

    for task_id in task_ids():
        action = reference_design_policy(load_task(task_id)).actions[-1]
        assert parse_action(action, "design").tool == "submit_design", task_id  # within MAX_DESIGN_CHARS
