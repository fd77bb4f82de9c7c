"""The env process under untrusted input (issue 10, item 3).

- ``replay()`` takes only task ids that name registered tasks: an id that is a path (relative or
  absolute) once loaded and executed that Python file as a task spec.
- ``step``, ``reset`` and ``close`` from several threads: an evaluation in flight is awaited, never
  crashed into (``close()`` during ``submit`` made ``step()`` raise AttributeError; a ``reset()``
  during ``submit`` gave the new episode a terminated first step). The races are driven by an
  evaluation that blocks on an event, not by sleeping.
"""

import os
import threading

import gymnasium as gym
import pytest

from conftest import call

from d2k_env.env import KernelEnv, replay
from d2k_env.evaluator import EvalResult, Evaluator, WorkloadResult
from d2k_env.task import project_root, task_ids

TASK = "fused_add_rmsnorm"


def _result(mode):
    return EvalResult(mode, "interpreter", [WorkloadResult("w", True, "stub verdict")])


@pytest.fixture
def env():
    e = KernelEnv(TASK, backend="interpreter")
    e.reset(seed=0)
    yield e
    e.close()


# -- task ids -------------------------------------------------------------------------------------------
@pytest.fixture
def planted(tmp_path):
    """A Python file outside tasks/ that leaves a marker when executed; yields (its id forms, marker)."""
    marker = tmp_path / "executed"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\nTITLE = 'evil'\n")
    stem = tmp_path / "evil"
    return {"relative": os.path.relpath(stem, project_root() / "tasks"), "absolute": str(stem)}, marker


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_replay_of_a_path_as_task_id_executes_nothing(env, planted, form):
    ids, marker = planted
    state = {**env.state(), "task_id": ids[form]}
    with pytest.raises(ValueError, match="registered tasks") as caught:
        replay(state)
    assert all(t in str(caught.value) for t in task_ids())
    assert not marker.exists(), "replay() executed a file named by the state's task id"


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_an_env_for_a_path_as_task_id_executes_nothing(planted, form):
    ids, marker = planted
    with pytest.raises(KeyError, match="unknown task"):
        KernelEnv(ids[form], backend="interpreter")
    assert not marker.exists(), "the constructor executed a file named by its task id"


@pytest.mark.parametrize("task_id", [None, ["fused_add_rmsnorm"], "", "tasks/fused_add_rmsnorm", "_private"])
def test_replay_of_a_malformed_task_id_is_a_clear_value_error(env, task_id):
    with pytest.raises(ValueError, match="registered tasks"):
        replay({**env.state(), "task_id": task_id})


@pytest.mark.parametrize("broken", [
    lambda s: [s], lambda s: {k: v for k, v in s.items() if k != "actions"},
    lambda s: {**s, "actions": "not a list"},
])
def test_replay_of_a_malformed_state_is_a_clear_value_error(env, broken):
    with pytest.raises(ValueError, match="state"):
        replay(broken(env.state()))


# -- threads ------------------------------------------------------------------------------------------
class BlockingEvaluations:
    """Replaces Evaluator.evaluate: signals ``started``, then waits for ``release``."""

    def __init__(self):
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, evaluator, path, mode="test", workloads=None, seed=None):
        self.started.set()
        assert self.release.wait(60), "the test never released the evaluation"
        return _result(mode)


class Background:
    """``fn(*args, **kwargs)`` on a thread; ``result()`` joins it and returns (or raises) its outcome."""

    def __init__(self, fn, *args, **kwargs):
        self._outcome = {}
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn, args, kwargs):
        try:
            self._outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread by result()
            self._outcome["error"] = exc

    def waiting_after(self, seconds):
        """Whether the call is still running ``seconds`` from now (it had that long to finish)."""
        self._thread.join(seconds)
        return self._thread.is_alive()

    def result(self):
        self._thread.join(60)
        assert not self._thread.is_alive(), "the call never returned"
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["value"]


@pytest.fixture
def blocking(monkeypatch):
    gate = BlockingEvaluations()
    monkeypatch.setattr(Evaluator, "evaluate", lambda self, *args, **kwargs: gate(self, *args, **kwargs))
    yield gate
    gate.release.set()  # never leave a thread blocked behind a failed assertion


def test_close_during_an_evaluation_waits_for_it(env, blocking):
    root = env.workspace.root
    submit = Background(env.step, call("submit"))
    assert blocking.started.wait(30)
    closing = Background(env.close)
    assert closing.waiting_after(0.5), "close() returned while an evaluation was in flight"
    blocking.release.set()
    obs, reward, terminated, truncated, info = submit.result()
    assert terminated and reward == 1.0 and "Submitted" in obs
    closing.result()
    assert not root.exists()
    with pytest.raises(gym.error.ResetNeeded, match="closed"):
        env.step(call("list_files"))


def test_reset_during_a_submit_starts_a_clean_episode(env, blocking):
    submit = Background(env.step, call("submit"))
    assert blocking.started.wait(30)
    resetting = Background(env.reset, seed=1)
    assert resetting.waiting_after(0.5), "reset() returned while an evaluation was in flight"
    blocking.release.set()
    assert submit.result()[2], "the submit did not end its episode"
    resetting.result()
    obs, reward, terminated, truncated, info = env.step(call("list_files"))
    assert not terminated and not truncated and info["steps"] == 1 and "solution.py" in obs
    assert env.state()["seed"] == 1 and env.state()["steps"] == 1


def test_state_during_an_evaluation_is_the_state_after_it(env, blocking):
    run = Background(env.step, call("run_tests"))
    assert blocking.started.wait(30)
    snapshot = Background(env.state)
    assert snapshot.waiting_after(0.5), "state() read an episode while a step was changing it"
    blocking.release.set()
    run.result()
    assert snapshot.result() == env.state()
