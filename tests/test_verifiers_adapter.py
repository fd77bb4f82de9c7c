"""The verifiers adapter: verifiers' own rollout loop plays kernel episodes against a scripted
OpenAI-compatible server on loopback (tests/mock_openai.py), and the rubric reads the env's
reward. Needs the ``verifiers`` extra (skipped without it); verifiers' chat harness runs as a
uv script, whose few dependencies uv installs once into its cache."""

import asyncio
import json
import os
import shutil
import subprocess
import tomllib
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


# -- verifiers' own CLIs, as users type them (issue 26, item 2) --------------------------------------
# The environment package environments/d2k_kernels (what `pip install -e environments/d2k_kernels`
# installs) is put on the path, as an install would; verifiers imports it by the id typed.
PACKAGE_DIR = ROOT / "environments" / "d2k_kernels"
ONE_EPISODE = ["fused_add_rmsnorm", "L1", "interpreter"]


def _cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(PACKAGE_DIR), str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path, **env})


def _results(directory: Path, name: str) -> list[dict]:
    (path,) = directory.rglob(name)
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_environment_package_is_named_as_verifiers_names_its_own():
    pyproject = tomllib.loads((PACKAGE_DIR / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "d2k-kernels"  # a dash name, importable as d2k_kernels
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [adapter.TASKSET_ID]


def test_vf_eval_finds_the_environment_by_its_id_and_scores_the_reference(tmp_path):
    actions = [{"tool": "write_file", "args": {"path": "solution.py", "content": REFERENCE}},
               {"tool": "submit", "args": {}}]
    task, guidance, backend = ONE_EPISODE
    with MockChatServer(scripted(actions)) as server:
        run = _cli(["vf-eval", "d2k_kernels", "-m", "mock-kernel-model", "--no-push", "-o", "out",
                    "--client.base-url", server.url, "--client.api-key-var", "D2K_MOCK_KEY",
                    "--env.taskset.tasks", task, "--env.taskset.guidance", guidance,
                    "--env.taskset.backend", backend], tmp_path, D2K_MOCK_KEY="test-key")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (episode,) = _results(tmp_path / "out", "traces.jsonl")
    (trace,) = episode["traces"]
    assert trace["info"]["d2k"] == {"reward": 1.0, "submitted": True, "steps": 2}, trace.get("errors")


def test_vf_validate_finds_the_taskset_by_its_id_and_its_noop_scores_0(tmp_path):
    task, guidance, backend = ONE_EPISODE
    run = _cli(["vf-validate", "d2k_kernels", "-o", "out", "--runtime.type", "subprocess",
                "--taskset.tasks", task, "--taskset.guidance", guidance, "--taskset.backend", backend], tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (row,) = _results(tmp_path / "out", "results.jsonl")
    assert row["name"] == f"{task}/{guidance}/0" and row["error"] is None
    assert row["noop"]["valid"] and row["noop"]["rewards"] == {"kernel_reward": 0.0}
