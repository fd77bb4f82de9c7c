"""The env process under untrusted input (issue 10, item 3).

- ``replay()`` takes only task ids that name registered tasks: an id that is a path (relative or
  absolute) once loaded and executed that Python file as a task spec.
"""

import os

import pytest

from d2k_env.env import KernelEnv, replay
from d2k_env.task import project_root, task_ids

TASK = "fused_add_rmsnorm"


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
