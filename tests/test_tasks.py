"""Every task is complete, every reference passes under the interpreter, and the checker catches
wrong solutions (GPU MODE-style correct/wrong fixtures in tests/solutions)."""

from pathlib import Path

import pytest
import torch

from conftest import TASK_IDS
from d2k_env.evaluator import Evaluator
from d2k_env.prompt import build_prompt, describe_inputs
from d2k_env.task import GUIDANCE_LAYERS, Workload, load_task

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
        assert x[torch.isfinite(x)].float().std() > 0  # never constants (+inf marks empty partitions)


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


@pytest.mark.parametrize("variant, ok", [
    ("x / scale", True),
    ("x * (1 / scale)", True),  # 0.05% of q at fp8 ties move
    ("scale one ulp off", True),  # 0.14%
    ("bf16 reciprocal and product", False),  # 3.1%, every element still within one fp8 step
])
def test_fp8_checker_tells_fp32_rounding_from_lower_precision(variant, ok):
    task = load_task("per_token_group_quant_fp8")
    M, K = 256, 2048
    (x,) = task.make_inputs(Workload("t", {"M": M, "K": K}), torch.Generator().manual_seed(1),
                            torch.device("cpu"))
    groups = x.float().reshape(M, K // 128, 128)
    scale = groups.abs().amax(-1, keepdim=True).clamp(min=1e-10) / 448.0
    scaled = {
        "x / scale": groups / scale,
        "x * (1 / scale)": groups * (1.0 / scale),
        "scale one ulp off": groups / (scale * (1 + 2.0 ** -23)),
        "bf16 reciprocal and product": (x.reshape(M, K // 128, 128) * (1.0 / scale).to(torch.bfloat16)).float(),
    }[variant]

    def quantise(v):
        return v.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).reshape(M, K)

    expected = (quantise(groups / scale), scale.reshape(M, K // 128))
    verdict = task.checker((quantise(scaled), expected[1]), expected, (x,))
    assert verdict.ok is ok, verdict.message
    assert ok or "lower precision inside" in verdict.message


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_prompt_says_what_a_solution_may_and_may_not_do(task_id):
    prompt = build_prompt(load_task(task_id), (), "", "interpreter", 350, "")
    assert "## What solution.py may and may not do" in prompt
    assert "functools.lru_cache" in prompt and "tensors kept between calls" in prompt
