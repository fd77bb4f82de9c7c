"""Inputs updated in place and checked like outputs (d2k_env.tasks.in_place): the spec's validation,
the checked values, and, on a task that has one (gdn_recurrent_decode's state pool), that a kernel
skipping the write-back or keeping the state in bf16 is caught by the updated input's check alone."""

import json
import textwrap

import pytest
import torch

from d2k_env.task import load_task
from d2k_env.tasks import (Heldout, Output, PerOutput, Roofline, SpecError, TaskSpec, Tolerance, UpdatedInput,
                           Workload, checked_values)

W = Workload("w", {"n": 4})


def spec(**fields):
    base = dict(title="t", family="f", sources=["s"], description="d", outputs=[Output("y", torch.float32)],
                workloads=[W], smoke_workloads=[W], allowed_torch=[],
                make_inputs=lambda w, gen, device: (torch.zeros(w["n"]), torch.zeros(w["n"], dtype=torch.float64)),
                roofline=lambda w: Roofline(1.0),
                heldout=Heldout("any n", lambda rng, smoke: [Workload("h", {"n": 5})]))
    return TaskSpec(**{**base, **fields})


def test_an_updated_input_is_checked_and_described_after_the_outputs():
    s = spec(in_place_inputs=(1,), updated_inputs=(UpdatedInput(1, "acc", torch.float64),),
             check=PerOutput({"acc": Tolerance(1e-9, 0.0, why="exact sums")}))
    assert [o.name for o in s.checked_outputs] == ["y", "acc"]
    assert "acc: every element within 1e-09" in s.checked and "acc is input 1 as forward leaves it" in s.checked
    inputs = (torch.ones(4), torch.arange(4.0, dtype=torch.float64))
    out = checked_values(s, (torch.zeros(4),), inputs)
    assert len(out) == 2 and out[1] is inputs[1]


@pytest.mark.parametrize("fields, words", [
    (dict(updated_inputs=(UpdatedInput(1, "acc", torch.float64),)), "inputs listed in in_place_inputs too"),
    (dict(in_place_inputs=(1,), updated_inputs=(UpdatedInput(1, "y", torch.float64),)), "distinct from"),
    (dict(in_place_inputs=(0, 1), updated_inputs=(UpdatedInput(1, "a", torch.float64),
                                                  UpdatedInput(1, "b", torch.float64))), "each input named once"),
    (dict(in_place_inputs=(1,), updated_inputs=(1,)), "a list of UpdatedInput"),
    (dict(check=PerOutput({"acc": Tolerance(0, 0)})), "which is no output"),  # not declared: no such value
])
def test_a_wrong_updated_input_is_refused_naming_the_field(fields, words):
    with pytest.raises(SpecError, match="updated_inputs|check") as err:
        spec(**fields)
    assert words in str(err.value)


def test_no_output_is_allowed_only_where_updated_inputs_are_the_result():
    """rope_qk_inplace returns nothing: q and k, updated in place, are all it computes."""
    s = spec(outputs=[], in_place_inputs=(1,), updated_inputs=(UpdatedInput(1, "acc", torch.float64),),
             check=PerOutput({"acc": Tolerance(1e-9, 0.0, why="exact sums")}))
    assert [o.name for o in s.checked_outputs] == ["acc"]
    inputs = (torch.ones(4), torch.arange(4.0, dtype=torch.float64))
    assert checked_values(s, (), inputs) == (inputs[1],)
    with pytest.raises(SpecError, match="empty only where updated_inputs names the result"):
        spec(outputs=[])


def test_updated_input_fields_are_validated():
    for bad in (dict(index=-1, name="a", dtype=torch.float32), dict(index=0, name="no name", dtype=torch.float32),
                dict(index=0, name="a", dtype="float32")):
        with pytest.raises(SpecError, match="updated_inputs"):
            UpdatedInput(**bad)


def test_checked_values_refuses_an_input_of_another_dtype():
    s = spec(in_place_inputs=(1,), updated_inputs=(UpdatedInput(1, "acc", torch.float32),))
    with pytest.raises(ValueError, match="has dtype torch.float64, the spec says torch.float32"):
        checked_values(s, (torch.zeros(4),), (torch.zeros(4), torch.zeros(4, dtype=torch.float64)))


# Runs the reference and edited copies of it on the task's smoke workloads, in a fresh interpreter
# process; prints each variant's verdict per workload as JSON.
SCRIPT = """
import importlib.util, json, sys
import torch
from d2k_env.evaluator import interpreter_patch
from d2k_env.task import load_task
from d2k_env.tasks import checked_values
interpreter_patch.apply()

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

task = load_task("gdn_recurrent_decode")
baseline = load(task.baseline_path, "baseline")
names = [o.name for o in task.spec.checked_outputs]
verdicts = {}
for variant in VARIANTS:
    solution = load(variant, "solution_" + variant.split("/")[-1][:-3])
    for w in task.smoke_workloads:
        inputs = task.make_inputs(w, torch.Generator().manual_seed(1), torch.device("cpu"))
        ours = tuple(x.clone() for x in inputs)
        expected = checked_values(task.spec, (baseline.forward(*inputs),), inputs)
        got = checked_values(task.spec, (solution.forward(*ours),), ours)
        v = task.spec.check.verdict(dict(zip(names, got)), dict(zip(names, expected)), inputs)
        verdicts.setdefault(variant, []).append(v.message if not v.ok else "")
print(json.dumps(verdicts))
"""
FINAL_STORE = "    tl.store(s_ptrs, S, mask=mask_s)\n"
VARIANTS = {
    "reference": None,
    "state_not_written_back": "",
    "state_kept_in_bf16": "    tl.store(s_ptrs, S.to(tl.bfloat16).to(tl.float32), mask=mask_s)\n",
}


def test_the_state_check_alone_catches_a_skipped_or_narrowed_write_back(interpreted, tmp_path):
    reference = load_task("gdn_recurrent_decode").reference_path.read_text()
    assert reference.count(FINAL_STORE) == 1
    paths = {}
    for name, store in VARIANTS.items():
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(reference if store is None else reference.replace(FINAL_STORE, store))
    script = tmp_path / "run.py"
    script.write_text(f"VARIANTS = {json.dumps([str(p) for p in paths.values()])}\n" + textwrap.dedent(SCRIPT))
    done = interpreted.run(script)
    assert done.returncode == 0, done.stderr
    verdicts = {name: json.loads(done.stdout)[str(p)] for name, p in paths.items()}
    assert verdicts["reference"] == ["", ""]
    for name in ("state_not_written_back", "state_kept_in_bf16"):
        # Every workload fails on the state alone: the output o is right (it is read from registers).
        assert all(m.startswith("state: ") and "o: " not in m for m in verdicts[name]), (name, verdicts[name])


def test_an_evaluation_refuses_a_kernel_that_skips_the_write_back(tmp_path):
    from d2k_env.evaluator import Evaluator

    task = load_task("gdn_recurrent_decode")
    solution = tmp_path / "solution.py"
    solution.write_text(task.reference_path.read_text().replace(FINAL_STORE, ""))
    ev = Evaluator(task, "interpreter")
    try:
        result = ev.evaluate(solution, "test", seed=1)
    finally:
        ev.close()
    assert not result.correct and any(w.message.startswith("state: ") for w in result.workloads)
