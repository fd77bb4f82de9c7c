"""Writing a task: a bad spec fails at load naming the file, the field and what was expected; `d2k
new-task` scaffolds a task that loads; and a scratch task made with it, outside the repository and
named in D2K_TASKS_PATH, gets every generic test of tests/test_every_task.py, and every template of
tests/security/ (the generic exploit classes), with no test edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from d2k_env.cli import main
from d2k_env.evaluator.protocol import derive_seed
from d2k_env.task import TASKS_PATH_VAR, load_task, task_ids
from d2k_env.tasks import Heldout, OneStep, Output, PerOutput, SpecError, Tolerance, Workload
from d2k_env.tasks.wrong_solutions import generate

TESTS = Path(__file__).resolve().parent
SCRATCH = "scratch_row_l2"


@pytest.fixture
def scaffolded(tmp_path) -> Path:
    assert main(["new-task", SCRATCH, "--dir", str(tmp_path)]) == 0
    return tmp_path


def test_the_scaffold_loads_with_a_generated_check_sentence_and_every_wrong_solution(scaffolded):
    task = load_task(SCRATCH, scaffolded)
    assert task.outputs == ["y"] and task.heldout_workloads(3, smoke=True)
    assert task.description.endswith(task.spec.checked) and "within 0.0001 + 0.0001 * |expected|" in task.description
    made = {g.kind: g for g in generate(task)}
    assert [g.origin for g in made.values()] == ["generated"] * 6
    # The launch capped at the 5 rows of the largest smoke workload; one block as wide as the widest
    # workload of either backend (8192).
    assert "_l2_normalise_rows[_wrong_capped((M,), (5,))]" in made["grid_capped"].source
    assert ", 8192, BLOCK=1024)" in made["fixed_width_block"].source
    assert main(["new-task", SCRATCH, "--dir", str(scaffolded)]) == 2  # never overwrites


@pytest.mark.parametrize("old, new, field, expected", [
    ('title="', 'title=3 or "', "title", "a non-empty string"),
    ('outputs=[Output("y", torch.float32)]', "outputs=['y']", "outputs", "a non-empty list of Output(name, dtype)"),
    ('Output("y", torch.float32)', 'Output("y", "float32")', "outputs", "dtype a torch.dtype"),
    ("smoke_workloads=[", "smoke_workloads=[{'M': 1}, ", "smoke_workloads", "a non-empty list of Workload"),
    ("roofline=roofline", "roofline=lambda: 0", "roofline", "roofline(workload) -> Roofline"),
    ("roofline=roofline", "roofline=roofline, allocation_limit=1 << 30", "allocation_limit",
     "allocation_limit(workload) -> bytes"),
    ("check=PerOutput()", "check=PerOutput({'z': OneStep()})", "check", "'z', which is no output"),
    ("check=PerOutput()", "check=PerOutput({'y': OneStep()})", "check", "OneStep is for bf16, fp16 and fp8"),
    ('Return y [M, N] fp32', 'Checked: y. Return y [M, N] fp32', "description", "no 'Checked:' sentence"),
    # Held-out rows capped at the 5 rows of the smoke workloads: no shape goes past them.
    ("{\"M\": m, \"N\": n}) for m, n in shapes]", "{\"M\": min(m, 5), \"N\": n}) for m, n in shapes]", "heldout",
     "the interpreter (smoke=True) draw of seed 0: M at most 5, the smoke workloads' largest 5"),
    # No GPU shape wider than the 8192 of the widest GPU workload.
    ("rng.randint(8193, 32768)", "rng.randint(1, 8192)", "heldout", "the workloads' largest 8192"),
    ("heldout_workloads),", "heldout_workloads, fixed=('K',)),", "heldout", "fixed naming axes of the workloads (M, N)"),
    ("return [Workload(", "return []; [Workload(", "heldout", "a non-empty list of Workload"),
    ("{\"M\": m, \"N\": n}) for m, n in shapes]", "{\"M\": m}) for m, n in shapes]", "heldout",
     "held-out shapes with every param of the workloads (M, N)"),
])
def test_a_bad_spec_fails_at_load_naming_the_file_the_field_and_what_was_expected(scaffolded, old, new, field,
                                                                                   expected):
    spec = scaffolded / "tasks" / f"{SCRATCH}.py"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new, 1).replace("from d2k_env.tasks import (", "from d2k_env.tasks import (OneStep, "))
    with pytest.raises(ValueError) as caught:
        load_task(SCRATCH, scaffolded)
    message = str(caught.value)
    assert message.startswith(f"{spec}: field {field!r}: expected ") and expected in message, message


def test_an_axis_the_family_holds_fixed_is_named_not_exceeded():
    """A group size that every workload and every held-out shape shares: an error naming the axis and the
    draw, until the spec names it in Heldout(fixed=...)."""
    from d2k_env.tasks.spec import _check_heldout_coverage

    def draw(rng, smoke):
        return [Workload("rows", {"M": rng.randint(9, 99) if smoke else 9000, "G": 128})]

    smoke, gpu = [Workload("s", {"M": 8, "G": 128})], [Workload("g", {"M": 4096, "G": 128})]
    with pytest.raises(SpecError, match=r"the interpreter \(smoke=True\) draw of seed 0: G at most 128, the smoke "
                                        r"workloads' largest 128"):
        _check_heldout_coverage(Heldout("rows", draw), gpu, smoke)
    _check_heldout_coverage(Heldout("rows", draw, fixed=("G",)), gpu, smoke)


def test_a_spec_without_task_names_what_it_must_bind(scaffolded):
    spec = scaffolded / "tasks" / f"{SCRATCH}.py"
    spec.write_text(spec.read_text().replace("TASK = TaskSpec(", "SPEC = TaskSpec("))
    with pytest.raises(ValueError, match=r"expected TASK = d2k_env.tasks.TaskSpec\(...\); got NoneType"):
        load_task(SCRATCH, scaffolded)


def test_the_check_sentence_follows_the_checker():
    outputs = [Output("out", torch.bfloat16), Output("lse", torch.float32), Output("ids", torch.int32)]
    text = PerOutput({"lse": Tolerance(1e-5, 1e-5, why="fp32")}).describe(outputs)
    assert text.startswith("out: every element within one bfloat16 step of the expected value")
    assert "lse: every element within 1e-05 + 1e-05 * |expected| (fp32)" in text
    assert "ids: every element exactly as expected" in text
    with pytest.raises(SpecError, match="field 'outputs'"):
        Output("not an id", torch.float32)


def test_a_scratch_task_from_the_scaffold_gets_every_generic_test(scaffolded):
    """The generic module, run in a fresh process with D2K_TASKS_PATH naming the scratch directory,
    selects the scratch task's tests only: each passes, none skipped (the example has a mask, an
    eps, an fp32 output and rows)."""
    env = {**os.environ, TASKS_PATH_VAR: str(scaffolded)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", SCRATCH,
                          str(TESTS / "test_every_task.py")], cwd=TESTS.parent, env=env, capture_output=True,
                         text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # This process never saw it (unless its own environment names a tasks path): the subprocess
    # found it through the path.
    assert SCRATCH not in task_ids() or os.environ.get(TASKS_PATH_VAR)
    summary = run.stdout.strip().splitlines()[-1]
    assert summary.startswith("12 passed") and "skipped" not in summary, summary


def test_a_scratch_task_gets_every_generic_exploit_class(scaffolded):
    """The security driver, in a fresh process with D2K_TASKS_PATH naming the scratch directory,
    instantiates every template of tests/security/ (Task: every) for the scratch task; the cases the
    static policy refuses (they start no process) are run, and pass."""
    from exploits import discover

    env = {**os.environ, TASKS_PATH_VAR: str(scaffolded)}
    driver = str(TESTS / "test_security.py")
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "-k",
                                SCRATCH, driver], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=600)
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    templates = [e for e in discover()[0] if e.template]
    assert len(templates) >= 10
    for e in templates:
        assert any(f"[{e.id}-{SCRATCH}]" in i for i in ids), f"{e.id} has no case for the scratch task:\n{collected.stdout[-3000:]}"
    refused = {e.id for e in templates if (v := e.verdict("interpreter", False)) is not None and v.alternatives
               and all("[policy]" in alt for alt in v.alternatives)}
    cheap = [i for i in ids if i.split("::")[1].startswith(("test_static_policy_verdict", "test_exploit_scores_zero"))
             and i.split("[", 1)[1].rsplit(f"-{SCRATCH}]", 1)[0] in refused | {e.id for e in templates if e.policy}]
    assert len(cheap) >= len(refused)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *cheap], cwd=TESTS.parent,
                         env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{len(cheap)} passed"), summary


def test_eval_submit_from_the_command_line_checks_the_heldout_shapes(scaffolded, monkeypatch, tmp_path):
    monkeypatch.setenv(TASKS_PATH_VAR, str(scaffolded))
    report = tmp_path / "result.json"
    reference = scaffolded / "references" / f"{SCRATCH}.py"
    assert main(["eval", SCRATCH, str(reference), "--backend", "interpreter", "--mode", "submit", "--seed", "1",
                 "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    held = [w["name"] for w in result["workloads"] if w["heldout"]]
    assert result["mode"] == "submit" and len(held) == 3 and all(w["correct"] for w in result["workloads"])
    assert held == [w.name for w in load_task(SCRATCH).heldout_workloads(derive_seed(1, "heldout"), smoke=True)]
