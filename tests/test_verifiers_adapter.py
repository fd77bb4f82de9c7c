"""The verifiers adapter: verifiers' own rollout loop plays kernel episodes against a scripted
OpenAI-compatible server on loopback (tests/mock_openai.py), and the rubric reads the env's
reward. Needs the ``verifiers`` extra (skipped without it); verifiers' chat harness runs as a
uv script, whose few dependencies uv installs once into its cache."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from conftest import Lazy, installed
from mock_openai import MockChatServer

pytestmark = [pytest.mark.skipif(not installed("verifiers.v1"), reason="needs the verifiers extra"),
              pytest.mark.skipif(shutil.which("uv") is None, reason="verifiers' chat harness needs uv")]
vf, adapter = Lazy("verifiers.v1"), Lazy("d2k_env.integrations.verifiers")

ROOT = Path(__file__).resolve().parent.parent
TASK = "fused_add_rmsnorm"
REFERENCE = (ROOT / "references" / f"{TASK}.py").read_text()


def scripted(actions: list[dict]):
    """A model that answers its n-th turn with the n-th action, as a fenced JSON tool call."""
    def script(body: dict) -> dict:
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return {"content": "Next step:\n```json\n" + json.dumps(actions[turn]) + "\n```"}
    return script


def play(env, url: str, tasks: int = 1) -> list:
    """Episodes of the env's first ``tasks`` tasks through verifiers' own episode runner."""
    ctx = vf.ModelContext(model="mock-kernel-model",
                          client=vf.EvalClientConfig(base_url=url, api_key_var="D2K_MOCK_KEY"))

    async def run():
        async with env.serving():
            return await asyncio.gather(*(env.run_episode(task, ctx) for task in list(env.taskset)[:tasks]))

    return asyncio.run(run())


def test_the_taskset_covers_tasks_guidance_and_seeds():
    env = adapter.load_environment(tasks=[TASK], guidance=["none", "L1"], seeds=[0, 1], backend="interpreter")
    assert env.config.taskset.id == adapter.TASKSET_ID
    assert [t.data.name for t in env.taskset] == [f"{TASK}/{g}/{s}" for g in ("none", "L1") for s in (0, 1)]


def test_a_scripted_model_submits_the_reference_and_the_rubric_reads_reward_1(monkeypatch):
    monkeypatch.setenv("D2K_MOCK_KEY", "test-key")
    actions = [{"tool": "read_file", "args": {"path": "baseline.py"}},
               {"tool": "write_file", "args": {"path": "solution.py", "content": REFERENCE}},
               {"tool": "submit", "args": {}}]
    env = adapter.load_environment(tasks=[TASK], guidance=["L1"], seeds=[3], backend="interpreter")
    with MockChatServer(scripted(actions)) as server:
        (episode,) = play(env, server.url)
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.info["d2k"] == {"reward": 1.0, "submitted": True, "steps": 3}
    assert trace.rewards["kernel_reward"].value == 1.0 and trace.reward == 1.0
    assert trace.metrics["submitted"] == 1.0 and trace.metrics["env_steps"] == 3.0
    # The model saw the env's prompt first, then each observation as the next user turn.
    first = server.requests[0]["messages"]
    assert first[0]["role"] == "system" and TASK in first[1]["content"] and "L1" in first[1]["content"]
    assert "baseline.py, lines 1-" in server.requests[1]["messages"][-1]["content"]
    assert len(server.requests) == 3


def test_a_model_that_never_submits_scores_0_within_the_step_budget(monkeypatch):
    monkeypatch.setenv("D2K_MOCK_KEY", "test-key")
    env = adapter.load_environment(tasks=[TASK], guidance=["none"], backend="interpreter", max_steps=2)
    with MockChatServer(scripted([{"tool": "list_files", "args": {}}] * 2)) as server:
        (episode,) = play(env, server.url)
    (trace,) = episode.traces
    assert trace.info["d2k"] == {"reward": 0.0, "submitted": False, "steps": 2}
    assert trace.rewards["kernel_reward"].value == 0.0
