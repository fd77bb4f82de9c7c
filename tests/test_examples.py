"""The examples as a user runs them: each checks its extra before any work, and an episode runner's
exit status says whether its episodes ran (llm_agent.py against the scripted server of
tests/mock_openai.py). Also d2k_env.extras, which the examples use for the check."""

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from d2k_env import extras
from mock_openai import MockChatServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
# Runs an example as ``python examples/X.py ARGS`` would, with the named modules not importable.
WITHOUT = textwrap.dedent("""
    import runpy, sys
    from importlib.abc import MetaPathFinder

    class Without(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    BLOCKED, script, *sys.argv[1:] = sys.argv[1].split(","), *sys.argv[2:]
    sys.meta_path.insert(0, Without())
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")
""")


def run_example(script: str, *args: str, without: tuple[str, ...] = (), timeout: float = 300,
                **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env}
    command = [sys.executable, "-c", WITHOUT, ",".join(without), str(EXAMPLES / script), *args]
    return subprocess.run(command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=timeout)


def test_every_extra_named_is_one_of_pyprojects():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras.EXTRAS) <= set(declared)


def test_require_names_the_extra_and_the_missing_modules(monkeypatch, capsys):
    monkeypatch.setitem(extras.EXTRAS, "agents", ("openai", "d2k_no_such_module"))
    assert extras.missing("agents") == ["d2k_no_such_module"]
    assert extras.missing("agents", ["openai"]) == []
    with pytest.raises(SystemExit) as exit:
        extras.require("agents", what="the example")
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the example needs the agents extra (d2k_no_such_module not installed)" in err
    assert 'pip install -e ".[agents]"' in err
    with pytest.raises(ValueError, match="unknown extra"):
        extras.missing("agent")
    with pytest.raises(ValueError, match="provides no torch"):
        extras.missing("agents", ["torch"])


def test_rl_candidates_stops_before_training_without_matplotlib():
    """It used to train for a minute and then die at ``import matplotlib``; now nothing runs."""
    run = run_example("rl_candidates.py", "--iterations", "1", without=("matplotlib",), timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "needs the agents extra (matplotlib not installed)" in run.stderr
    assert "iteration" not in run.stdout


@pytest.mark.parametrize("script, extra", [("llm_agent.py", "openai"), ("verifiers_eval.py", "verifiers"),
                                           ("openenv_client.py", "openenv"), ("trl_grpo.py", "trl")])
def test_each_example_checks_its_extra_first(script, extra):
    args = {"llm_agent.py": ["fused_add_rmsnorm"], "verifiers_eval.py": ["--base-url", "http://127.0.0.1:9/v1",
            "--model", "m"], "trl_grpo.py": ["--model", "m"], "openenv_client.py": []}[script]
    run = run_example(script, *args, without=(extra,), timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{extra} not installed" in run.stderr and "Traceback" not in run.stderr


def test_llm_agent_exits_nonzero_when_every_episode_failed(tmp_path):
    """The server refuses every request (400, not retried): both episodes fail, and so does the run."""
    with MockChatServer(lambda body: {"content": "never sent"}, faults=[400, 400]) as server:
        run = run_example("llm_agent.py", "fused_add_rmsnorm", "--run-dir", str(tmp_path / "run"),
                          "--backend", "interpreter", "--max-steps", "2", "--tool-mode", "text",
                          OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test-key", WANDB_MODE="disabled")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "0 episodes finished, 2 failed" in run.stdout
    assert "injected 400" in run.stderr


def test_llm_agent_exits_zero_when_every_episode_finished(tmp_path):
    """Episodes that end at the step budget without a submit finished: the run succeeded."""
    with MockChatServer(lambda body: {"content": '{"tool": "list_files", "args": {}}'}) as server:
        run = run_example("llm_agent.py", "fused_add_rmsnorm", "--run-dir", str(tmp_path / "run"),
                          "--backend", "interpreter", "--max-steps", "1", "--tool-mode", "text",
                          OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test-key", WANDB_MODE="disabled")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 episodes finished, 0 failed" in run.stdout
