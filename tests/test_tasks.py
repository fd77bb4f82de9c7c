"""Every task is complete, every reference passes under the interpreter, and the checker catches
wrong solutions (GPU MODE-style correct/wrong fixtures in tests/solutions)."""

from pathlib import Path

import pytest
import torch

from conftest import TASK_IDS
from d2k_env.evaluator import Evaluator
from d2k_env.prompt import build_prompt, describe_inputs
from d2k_env.task import GUIDANCE_LAYERS, load_task

SOLUTIONS = Path(__file__).parent / "solutions"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_is_complete(task_id):
    task = load_task(task_id)
    assert task.workloads and task.smoke_workloads and task.outputs
    for layer in GUIDANCE_LAYERS:
        text = task.guidance(layer)
        assert len(text.split()) > 80 and text.isascii()
        assert "def " not in text and "```" not in text  # rationale only, no code
    for w in task.workloads + task.smoke_workloads:
        roof = task.roofline(w)
        assert roof.bytes > 0 and roof.flops >= 0
        assert describe_inputs(task, w)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_inputs_are_seeded_and_structured(task_id):
    task = load_task(task_id)
    w = task.smoke_workloads[0]
    make = lambda seed: task.make_inputs(w, torch.Generator().manual_seed(seed), torch.device("cpu"))
    a, b, c = make(1), make(1), make(2)
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y) and not torch.equal(x, z)
        assert x.float().std() > 0  # never constants


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_passes_every_smoke_workload_under_the_interpreter(task_id):
    task = load_task(task_id)
    ev = Evaluator(task, "interpreter")
    result = ev.evaluate(task.reference_path, "test")
    ev.close()
    assert result.error is None, result.error + result.output
    assert [w.name for w in result.workloads] == [w.name for w in task.smoke_workloads]
    assert result.correct, [(w.name, w.message) for w in result.workloads]
    assert not result.timed


@pytest.mark.parametrize("fixture", sorted((SOLUTIONS / "correct").glob("*.py")), ids=lambda p: p.stem)
def test_correct_fixtures_pass(fixture):
    task = load_task(next(t for t in TASK_IDS if fixture.stem.startswith(t)))
    ev = Evaluator(task, "interpreter")
    result = ev.evaluate(fixture, "test")
    ev.close()
    assert result.correct, (result.error, [(w.name, w.message) for w in result.workloads])


@pytest.mark.parametrize("fixture", sorted((SOLUTIONS / "wrong").glob("*.py")), ids=lambda p: p.stem)
def test_wrong_fixtures_fail_with_a_named_workload(fixture):
    task = load_task(next(t for t in TASK_IDS if fixture.stem.startswith(t)))
    ev = Evaluator(task, "interpreter")
    result = ev.evaluate(fixture, "test")
    ev.close()
    assert result.error is None and not result.correct
    failing = [w for w in result.workloads if not w.correct]
    assert failing and all(w.message for w in failing)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_is_right_on_heldout_shapes_and_the_prompt_states_their_family(task_id):
    task = load_task(task_id)
    assert task.heldout_shapes and task.heldout_shapes in build_prompt(task, (), "", "interpreter", 350, "")
    ev = Evaluator(task, "interpreter")
    smallest = min(task.smoke_workloads, key=lambda w: task.roofline(w).bytes).name
    for seed in (101, 202):
        result = ev.evaluate(task.reference_path, "submit", [smallest], seed=seed)
        held = [w for w in result.workloads if w.name.startswith("held-out")]
        assert result.correct and len(held) == 2, [(w.name, w.message) for w in result.workloads]
    ev.close()
