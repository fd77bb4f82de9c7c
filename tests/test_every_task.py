"""Every registered task, tested the same way (no task is named here: the registry lists the shipped
tasks and those of D2K_TASKS_PATH, so a new task gets these tests by existing).

Per task: the spec and its pieces are complete; Gymnasium's check_env; inputs are seeded and
structured; the baseline gives the declared outputs and its own answer passes the checker; the
reference passes every smoke workload and the held-out shapes on the interpreter; and each kind of
wrong solution generated from the reference (d2k_env.tasks.wrong_solutions: tail mask dropped, eps
removed, one output scaled by 1 + 1e-3, last row unwritten, grid capped at a constant, a block of
fixed width) scores 0 on the task's own checks: the last two, right on every smoke workload by
construction, are submitted and must fail on held-out shapes only. A kind the task skips shows as a
skipped test with the task's reason.

Every evaluation uses a fixed seed, so no outcome depends on a random draw. The selected ones start
on two threads when the module starts (each is two sandboxed processes, mostly waited on), so that
they run beside each other and beside the tests that evaluate nothing; each test waits for its own.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import d2k_env
from conftest import serialised_ast_parse
from d2k_env.evaluator import Evaluator
from d2k_env.evaluator.checking import as_tuple
from d2k_env.prompt import build_prompt, describe_inputs
from d2k_env.reward import submission_reward
from d2k_env.task import GUIDANCE_LAYERS, load_task, task_ids
from d2k_env.tasks import HELDOUT_KINDS, WRONG_SOLUTION_KINDS
from d2k_env.tasks.wrong_solutions import generate
from d2k_env.verdict import format_result

TASK_IDS = task_ids()
SEED = 1  # inputs and held-out shapes of every evaluation here
CASES = [(t, kind) for t in TASK_IDS for kind in WRONG_SOLUTION_KINDS]


REFERENCE = "reference"  # the evaluation of test_reference_passes_smoke_and_heldout_shapes


def wrong_solution(task_id: str, kind: str):
    (made,) = [g for g in generate(load_task(task_id)) if g.kind == kind]
    return made


@pytest.fixture(scope="module", autouse=True)  # autouse: set up before the module's first test
def evaluations(request, tmp_path_factory):
    """The evaluations of the selected tests, by (task, REFERENCE or a wrong solution's kind), started
    on two threads in test order (the solution files written first, on this thread); one Evaluator
    per task (its evaluations share its Triton cache)."""
    directory = tmp_path_factory.mktemp("every_task")
    solutions: dict[tuple[str, str], Path] = {}
    for item in request.session.items:
        params = getattr(item, "callspec", None) and item.callspec.params
        if item.module is not request.module or not params or item.get_closest_marker("skip"):
            continue
        task_id = params["task_id"]
        if item.originalname in ("test_reference_passes_smoke_and_heldout_shapes",
                                 "test_reference_realises_its_automatic_properties"):
            solutions[task_id, REFERENCE] = load_task(task_id).reference_path
        elif item.originalname == "test_generated_wrong_solution_scores_zero":
            made = wrong_solution(task_id, params["kind"])
            if made.origin != "skipped":
                path = solutions[task_id, made.kind] = directory / f"{task_id}-{made.kind}" / "solution.py"
                path.parent.mkdir()
                path.write_text(made.source)
    evaluators = {t: Evaluator(load_task(t), "interpreter") for t in dict.fromkeys(t for t, _ in solutions)}

    def evaluate(task_id: str, kind: str):
        mode = "submit" if kind == REFERENCE or kind in HELDOUT_KINDS else "test"
        return evaluators[task_id].evaluate(solutions[task_id, kind], mode, seed=SEED)

    with serialised_ast_parse(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="every-task") as pool:
        futures: dict[tuple[str, str], Future] = {key: pool.submit(evaluate, *key) for key in solutions}
        try:
            yield lambda task_id, kind: futures[task_id, kind].result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for ev in evaluators.values():
                ev.close()


def load_module(path, name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_spec_and_pieces_are_complete(task_id):
    task = load_task(task_id)
    assert task.description.count("Checked: ") == 1 and task.description.endswith(".")
    for layer in GUIDANCE_LAYERS:
        text = task.guidance(layer)
        assert len(text.split()) > 80 and text.isascii()
        assert "def " not in text and "```" not in text  # rationale only, no code
    for w in task.workloads + task.smoke_workloads:
        roof = task.roofline(w)
        assert roof.bytes > 0 and roof.flops >= 0
        assert describe_inputs(task, w)
    prompt = build_prompt(task, (), "", "interpreter", 350, "")
    assert task.heldout_shapes in prompt and task.spec.checked in prompt
    assert "## What solution.py may and may not do" in prompt
    assert "Host code is ordinary Python" in prompt and "may depend only on the inputs' shapes" in prompt


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_check_env(task_id):
    env = gym.make(d2k_env.env_id(task_id), backend="interpreter")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_inputs_are_seeded_and_structured(task_id):
    task = load_task(task_id)
    w = task.smoke_workloads[0]
    make = lambda seed: task.make_inputs(w, torch.Generator().manual_seed(seed), torch.device("cpu"))  # noqa: E731
    a, b, c = make(1), make(1), make(2)
    for x, y, z in zip(a, b, c):
        if not isinstance(x, torch.Tensor):  # a size (experts, block): the workload's alone, never drawn
            assert type(x) is type(y) is type(z) and x == y == z
            continue
        assert torch.equal(x, y) and not torch.equal(x, z)
        v = x.float()  # fp8 has no isfinite on the CPU
        assert v[torch.isfinite(v)].std() > 0  # never constants (+inf may mark special entries)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_baseline_gives_the_declared_outputs_and_passes_its_own_check(task_id):
    """The expected outputs are the baseline's: they must be what the spec declares, deterministic,
    varied, and accepted by the task's checker as the answer they are."""
    task = load_task(task_id)
    baseline = load_module(task.baseline_path, f"baseline_{task_id}")
    for w in task.smoke_workloads:
        inputs = task.make_inputs(w, torch.Generator().manual_seed(SEED), torch.device("cpu"))
        fresh = lambda: tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)  # noqa: E731  (in-place inputs change)
        expected = as_tuple(baseline.forward(*fresh()))
        assert [o.dtype for o in expected] == [o.dtype for o in task.spec.outputs], w.name
        assert all(torch.equal(a, b) for a, b in zip(expected, as_tuple(baseline.forward(*fresh())))), w.name
        for name, e in zip(task.outputs, expected):
            flat = e.double().flatten()
            assert flat.numel() <= 1 or not bool((flat == flat[0]).all()), f"{w.name}: {name} is constant"
        verdict = task.checker(expected, expected, inputs)
        assert verdict.ok, (w.name, verdict.message)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_passes_smoke_and_heldout_shapes(task_id, evaluations):
    task = load_task(task_id)
    result = evaluations(task_id, REFERENCE)
    held = [w for w in result.workloads if w.heldout]
    assert result.correct, format_result(result)
    assert [w.name for w in result.workloads if not w.heldout] == [w.name for w in task.smoke_workloads]
    assert held and submission_reward("speedup", result) == 1.0


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_realises_its_automatic_properties(task_id, evaluations):
    """Every automatically checked design property of the task is found on each smoke workload of the
    reference's evaluation (the one above), and none is "not realised" there: a property its own
    reference breaks is a wrong property. (Trivial for a task without properties.)"""
    checked = [p.id for p in load_task(task_id).spec.design_properties if p.check is not None]
    result = evaluations(task_id, REFERENCE)
    for w in result.workloads:
        if w.heldout:
            continue
        assert sorted(w.properties) == sorted(checked), (w.name, w.properties)
        broken = {pid: f["detail"] for pid, f in w.properties.items() if f["status"] == "not realised"}
        assert not broken, f"the reference does not realise {broken} on {w.name}"


@pytest.mark.parametrize("task_id, kind", CASES, ids=[f"{t}-{k}" for t, k in CASES])
def test_generated_wrong_solution_scores_zero(task_id, kind, evaluations):
    made = wrong_solution(task_id, kind)
    if made.origin == "skipped":
        pytest.skip(f"the task skips it: {made.skipped}")
    result = evaluations(task_id, kind)
    text = format_result(result)
    assert not result.correct and submission_reward("speedup", result) == 0, f"{made.origin} {kind} passed:\n{text}"
    assert not (result.error or "").startswith("[policy]"), f"refused before running, not caught:\n{text}"
    if kind in HELDOUT_KINDS:  # right on the smoke shapes: the held-out ones alone must catch it
        assert result.error is None and all(w.correct for w in result.workloads if not w.heldout), text
        assert any(w.heldout and not w.correct for w in result.workloads), text
