"""Hand-written fixtures (GPU MODE-style correct/wrong solutions in tests/solutions, and wrong ones made
as edits of their reference in tests/wrong_edits.py, each named after its task) and task-specific
checker cases; what every task must meet is in tests/test_every_task.py."""

import ast
from pathlib import Path

import pytest
import torch

import wrong_edits
from conftest import TASK_IDS
from d2k_env.evaluator import Evaluator
from d2k_env.task import Workload, load_task

SOLUTIONS = Path(__file__).parent / "solutions"


@pytest.mark.parametrize("fixture", sorted((SOLUTIONS / "correct").glob("*.py")), ids=lambda p: p.stem)
def test_correct_fixtures_pass(fixture):
    task = load_task(next(t for t in TASK_IDS if fixture.stem.startswith(t)))
    ev = Evaluator(task, "interpreter")
    result = ev.evaluate(fixture, "test", seed=1)  # fixed: no outcome rests on a draw
    ev.close()
    assert result.correct, (result.error, [(w.name, w.message) for w in result.workloads])


@pytest.mark.parametrize("name", wrong_edits.names())
def test_wrong_fixtures_fail_with_a_named_workload(name, tmp_path):
    task = load_task(next(t for t in TASK_IDS if name.startswith(t)))
    ev = Evaluator(task, "interpreter")
    fixture = wrong_edits.wrong_solution(name, tmp_path)
    result = ev.evaluate(fixture, "test", seed=1)  # fixed: no outcome rests on a draw
    ev.close()
    assert result.error is None and not result.correct
    failing = [w for w in result.workloads if not w.correct]
    assert failing and all(w.message for w in failing)


def test_wrong_edits_apply_once_to_their_current_reference(tmp_path):
    files = {p.stem for p in wrong_edits.FILES.glob("*.py")}
    assert not files & set(wrong_edits.EDITS), "a wrong fixture both a file and an edit"
    for name, wrong in wrong_edits.EDITS.items():
        assert wrong.task in TASK_IDS and name.startswith(f"{wrong.task}_"), name
        source = wrong_edits.wrong_solution(name, tmp_path).read_text()
        compile(source, name, "exec")
        assert " ".join(ast.get_docstring(ast.parse(source)).split()) == f"Wrong: {wrong.fault}", name
        assert source != load_task(wrong.task).reference_path.read_text()


@pytest.mark.parametrize("old, times", [("text no reference has", 0), ("import triton", 2)])
def test_a_wrong_edit_that_does_not_apply_once_names_its_fixture_and_text(monkeypatch, tmp_path, old, times):
    wrong = wrong_edits.WrongEdit("rope_qk_inplace", "a stale edit.", ((old, "x"),))
    monkeypatch.setitem(wrong_edits.EDITS, "rope_qk_inplace_stale", wrong)
    with pytest.raises(ValueError, match=f"'rope_qk_inplace_stale'.*{old!r} occurs {times} times"):
        wrong_edits.wrong_solution("rope_qk_inplace_stale", tmp_path)


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


def test_awq_packing_puts_column_c_in_nibble_awq_order_c():
    """The AWQ task's inputs are packed in AWQ's order (column c of a word in nibble 0,4,1,5,2,6,3,7[c]),
    and its baseline unpacks them back to the same values."""
    import importlib.util
    task = load_task("awq_w4a16_gemm")
    spec = importlib.util.spec_from_file_location("tasks_awq", task.spec_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values = torch.arange(16, dtype=torch.int32).repeat(3, 1)  # two words per row: 0..7 and 8..15
    packed = module.pack_awq(values)
    assert packed.dtype == torch.int32 and packed.shape == (3, 2)
    for c, nibble in enumerate((0, 4, 1, 5, 2, 6, 3, 7)):
        assert int((packed[0, 1] >> (4 * nibble)) & 0xF) == 8 + c
    baseline = importlib.util.spec_from_file_location("baseline_awq", task.baseline_path)
    unpacker = importlib.util.module_from_spec(baseline)
    baseline.loader.exec_module(unpacker)
    assert torch.equal(unpacker.unpack(packed), values)
