"""The env process under untrusted input (issue 10, item 3): task ids from a state, calls from several
threads, and memory over a whole budget of large actions.

- ``replay()`` takes only task ids that name registered tasks: an id that is a path (relative or
  absolute) once loaded and executed that Python file as a task spec.
- ``step``, ``reset`` and ``close`` from several threads: an evaluation in flight is awaited, never
  crashed into (``close()`` during ``submit`` made ``step()`` raise AttributeError; a ``reset()``
  during ``submit`` gave the new episode a terminated first step). The races are driven by an
  evaluation that blocks on an event, not by sleeping.
- Memory: refused actions are kept as a short record (the refusal, the size, a hash), file contents
  once however often they are written; 30 refused 20 MB actions and 319 writes of 1 MB once grew the
  env process by 0.9 GB and its state() to 926 M characters.
"""

import json
import os
import threading
import tracemalloc

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
def fake(monkeypatch):
    """Evaluations answer 'correct' at once (bookkeeping needs no real evaluation)."""
    monkeypatch.setattr(Evaluator, "evaluate", lambda self, path, mode="test", *args, **kwargs: _result(mode))


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
    state = {**env.state().to_json(), "task_id": ids[form]}
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
        replay({**env.state().to_json(), "task_id": task_id})


@pytest.mark.parametrize("broken", [
    lambda s: [s], lambda s: {k: v for k, v in s.items() if k != "actions"},
    lambda s: {**s, "actions": "not a list"}, lambda s: {**s, "actions": [{"tool": "write_file", "args": {
        "path": "solution.py", "content": {"blob": "0" * 64}}}]},
    lambda s: {**s, "actions": [42]}, lambda s: {**s, "blobs": []},
    lambda s: {**s, "blobs": {"0" * 64: {"text": "not the string this key names"}}},
    lambda s: {**s, "blobs": {"0" * 64: {"base": "1" * 64, "ops": [[0, 1]]}}},
    lambda s: {**s, "files": {"solution.py": {"blob": "0" * 64}}},
])
def test_replay_of_a_malformed_state_is_a_clear_value_error(env, broken):
    with pytest.raises(ValueError, match="state"):
        replay(broken(env.state().to_json()))


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
    assert env.state().seed == 1 and env.state().steps == 1


def test_state_during_an_evaluation_is_the_state_after_it(env, blocking):
    run = Background(env.step, call("run_tests"))
    assert blocking.started.wait(30)
    snapshot = Background(env.state)
    assert snapshot.waiting_after(0.5), "state() read an episode while a step was changing it"
    blocking.release.set()
    run.result()
    assert snapshot.result() == env.state()


# -- memory --------------------------------------------------------------------------------------------
MB = 1_000_000


def _large_actions():
    """A whole budget of large actions (350), each a fresh object as an agent's would be: 26 refused
    20 MB texts and 319 writes of ~1 MB (the same content, to two files), as the issue measured, and
    five refusals of other kinds with megabytes in them."""
    content = ("# " + "y" * 97 + "\n") * 9_990  # 999,000 characters: a file just under the limit
    for _ in range(26):
        yield "x" * 20 * MB  # over the action length limit
    yield "{" + "x" * (MB + 500_000)  # not JSON
    yield call("write_file", path="solution.py", content="z" * (MB + 1))  # over the file limit
    yield call("write_file", path="solution.py", content="\u2603" * 600_000)  # 1.8 MB in UTF-8
    yield call("str_replace", path="solution.py", old="w" * 900_000, new="v")  # does not occur
    yield call("read_file", path="p" * 1_900_000)
    for i in range(319):
        yield call("write_file", path="solution.py" if i % 2 else "copy.py", content=content)


def test_memory_stays_bounded_over_a_budget_of_large_actions(env, fake):
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        n = 0
        for action in _large_actions():  # not enumerate(): its cached result tuple holds the last action
            env.step(action)
            del action  # only what the env keeps counts
            n += 1
            grown = tracemalloc.get_traced_memory()[0] - start
            # One copy of the 1 MB content, plus small records: never a copy per action.
            assert grown < 4 * MB, f"the env holds {grown / MB:.1f} MB more after {n} large actions"
    finally:
        tracemalloc.stop()
    assert n == env.max_steps
    state = env.state()
    assert len(json.dumps(state.to_json())) < 4 * MB  # the content once, and the two files that hold it
    refused = [entry for entry in state.actions if "refused" in entry]
    assert len(refused) == 31 and all(len(json.dumps(entry)) < 2_000 for entry in refused)


def test_refused_and_stored_once_actions_replay_exactly(env, fake):
    content = "A = 1\n" * 50_000
    env.step("{" + "x" * 5000)
    env.step(call("write_file", path="solution.py", content=content))
    env.step(call("write_file", path="notes/copy.py", content=content))
    env.step(call("str_replace", path="solution.py", old="A = 1\n" * 2, new="B = 2\n"))  # refused: occurs many times
    env.step(call("run_tests"))
    obs, *_ = env.step("x" * 3_000_000)
    state = json.loads(json.dumps(env.state().to_json()))
    assert len(state["blobs"]) == 1  # the content once, though written twice
    entry = state["actions"][-1]
    assert entry["chars"] == 3_000_000 and len(entry["sha256"]) == 64 and "at most" in entry["refused"]
    again = replay(state)
    try:
        assert again.unwrapped.state().to_json() == state and again.unwrapped._last_observation == obs
    finally:
        again.close()


def test_a_refused_write_leaves_no_directory_behind(env, fake):
    # The refusal is recorded without its arguments, so it must have changed nothing: a directory
    # left by the failed write would make the next write fail here and succeed in a replay.
    obs, *_ = env.step(call("write_file", path="made/deeper/" + "x" * 300, content="x"))  # name too long
    assert obs.startswith("ERROR") and not (env.workspace.root / "made").exists()
    obs, *_ = env.step(call("write_file", path="made", content="a file where the refused write made a directory"))
    assert obs.startswith("Wrote"), obs
    state = env.state()
    again = replay(state)
    try:
        assert again.unwrapped.state() == state
    finally:
        again.close()
