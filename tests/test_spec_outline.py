"""A spec's outline read from its source agrees with the loaded task, and is refused (None: the
caller loads the task) wherever the source could mean something other than it reads."""

import pytest

from d2k_env.spec_outline import Outline, read_outline
from d2k_env.task import load_task, task_roots
from d2k_env.tasks.scaffold import scaffold


@pytest.mark.parametrize("task_id", sorted(task_roots()))
def test_every_shipped_spec_outlines_as_it_loads(task_id):
    spec = task_roots()[task_id] / "tasks" / f"{task_id}.py"
    assert read_outline(spec) == Outline.of_task(load_task(task_id))


def test_the_scaffolded_spec_outlines_as_it_loads(tmp_path):
    spec = scaffold("scratch_outline", tmp_path)[0]
    assert read_outline(spec) == Outline.of_task(load_task("scratch_outline", tmp_path))


HEAD = "from d2k_env.tasks import TaskSpec, Workload\n"
PLAIN = HEAD + ('W = [Workload("8x8", {"M": 8}, launch_bound=True)]\n'
                'TASK = TaskSpec(title="T", family="f", workloads=W, smoke_workloads=[Workload("1x1", {"M": 1})])\n')


def _outline(tmp_path, source):
    spec = tmp_path / "t.py"
    spec.write_text(source)
    return read_outline(spec)


def test_a_literal_spec_outlines(tmp_path):
    outline = _outline(tmp_path, PLAIN)
    assert (outline.title, outline.family) == ("T", "f")
    assert [(w.name, w.params, w.launch_bound) for w in outline.workloads] == [("8x8", {"M": 8}, True)]
    assert [w.name for w in outline.smoke_workloads] == ["1x1"]


@pytest.mark.parametrize("source", [
    PLAIN + "W.append(Workload('9x9', {'M': 9}))\n",  # the list changed after it was written
    PLAIN + "TASK.smoke_workloads.append(Workload('9x9', {'M': 9}))\n",
    PLAIN + "def more():\n    global W\n    W = []\n",  # a function may rebind it
    PLAIN + "W = W[:1]\n",  # bound twice
    PLAIN + "globals()['W'] = []\n",
    PLAIN.replace("workloads=W,", "workloads=[Workload(f'{m}x8', {'M': m}) for m in (1, 2)],"),
    PLAIN.replace('family="f"', 'family="f".upper()'),
    PLAIN.replace(HEAD, "from mine import TaskSpec, Workload\n"),  # not the task-author API's
    PLAIN.replace(HEAD, "from d2k_env.tasks import TaskSpec, Output as Workload\n"),
    PLAIN + "TASK = TaskSpec(title='U', family='g', workloads=W, smoke_workloads=W)\n",
    "this is not python",
])
def test_a_spec_that_could_mean_otherwise_is_not_outlined(tmp_path, source):
    assert _outline(tmp_path, source) is None


def test_a_missing_spec_is_not_outlined(tmp_path):
    assert read_outline(tmp_path / "absent.py") is None
