"""AccumulationBound (d2k_env.tasks.accumulation): a GEMM output checked against a bound from the sum of
its terms' magnitudes. Honest orders of summation, an fp8 tensor core's narrow partial sums included,
pass; wrong scales, a dropped K block and NaN fail. Torch stands in for the kernels: no evaluation."""

import importlib.util

import pytest
import torch

from d2k_env.task import Workload, load_task
from d2k_env.tasks import AccumulationBound, Output, PerOutput, Tolerance

BLOCK = 128


@pytest.fixture(scope="module")
def gemm():
    """The block-fp8 GEMM task's inputs on a shape with several K blocks and a partial N block, the
    dequantised operands in fp64, and the task."""
    task = load_task("w8a8_block_fp8_gemm")
    inputs = task.make_inputs(Workload("t", {"M": 48, "N": 200, "K": 1024}), torch.Generator().manual_seed(3),
                              torch.device("cpu"))
    a, a_scales, b, b_scales = inputs
    A = a.double() * a_scales.double().repeat_interleave(BLOCK, 1)
    B = b.double() * b_scales.double().repeat_interleave(BLOCK, 0)[:b.shape[0]].repeat_interleave(BLOCK, 1)
    return task, inputs, A, B


def chop(x, bits):
    """x truncated to ``bits`` significant bits: a narrow accumulator that drops what it cannot hold."""
    m, e = torch.frexp(x)
    return torch.ldexp(torch.trunc(torch.ldexp(m, torch.full_like(e, bits))), e - bits)


def blockwise(A, B, partial=lambda p: p):
    """sum over K blocks of each block's product; ``partial`` maps the ordered slices of 32 products
    of a block to that block's partial sum."""
    K = A.shape[1]
    out = torch.zeros(A.shape[0], B.shape[0], dtype=torch.float64)
    for k in range(0, K, BLOCK):
        slices = [A[:, j:j + 32] @ B[:, j:j + 32].t() for j in range(k, k + BLOCK, 32)]
        out += partial(slices).float().double()  # each block's partial rounded to fp32 on promotion
    return out


def narrow_accumulator(slices):
    acc = torch.zeros_like(slices[0])
    for s in slices:
        acc = chop(acc + s, 14)  # about 14 bits kept of the running sum (the DeepSeek-V3 report's figure)
    return acc


def verdict(task, inputs, c):
    """The task's checker on ``c`` rounded to bf16, against the baseline's answer (as the evaluator runs it)."""
    spec = importlib.util.spec_from_file_location("baseline_w8a8_block_fp8_gemm", task.baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    return task.checker((c.to(torch.bfloat16),), (baseline.forward(*inputs),), inputs)


@pytest.mark.parametrize("variant", ["fp64 exact", "fp32 blockwise", "fp8 tensor core narrow partials"])
def test_honest_summation_orders_pass(gemm, variant):
    task, inputs, A, B = gemm
    c = {"fp64 exact": lambda: A @ B.t(),
         "fp32 blockwise": lambda: blockwise(A.float().double(), B.float().double(), lambda s: sum(s)),
         "fp8 tensor core narrow partials": lambda: blockwise(A, B, narrow_accumulator)}[variant]()
    v = verdict(task, inputs, c)
    assert v.ok, v.message


@pytest.mark.parametrize("variant", ["per-tensor weight scale", "weight scales of the wrong block",
                                     "last K block dropped", "NaN"])
def test_wrong_answers_fail(gemm, variant):
    task, inputs, A, B = gemm
    a, a_scales, b, b_scales = inputs
    N = b.shape[0]
    if variant == "per-tensor weight scale":
        c = A @ (b.double() * b_scales.double().max()).t()
    elif variant == "weight scales of the wrong block":  # column blocks of the scales read in reverse
        flipped = b_scales.double().flip(0).repeat_interleave(BLOCK, 0)[:N].repeat_interleave(BLOCK, 1)
        c = A @ (b.double() * flipped).t()
    elif variant == "last K block dropped":
        c = A[:, :-BLOCK] @ B[:, :-BLOCK].t()
    else:
        c = A @ B.t()
        c[3, 5] = float("nan")
    v = verdict(task, inputs, c)
    assert not v.ok and v.message.startswith("c:"), variant


def test_the_bound_is_the_terms_not_the_result():
    """Where terms cancel, an error far above the result's own size passes if it is inside rel of the
    terms; the same error on terms that do not cancel fails."""
    check = AccumulationBound("y", lambda inputs: inputs[0], 1e-3, why="test")
    ref = torch.tensor([1e-6, 1e-6])
    terms = torch.tensor([1000.0, 1e-3])  # the first element cancels 1000 of magnitude to 1e-6
    out = ref + torch.tensor([0.5, 0.5])
    v = check.verdict({"y": out}, {"y": ref}, (terms,))
    assert not v.ok and "1 of 2 elements" in v.message and "[1]" in v.message


def test_other_outputs_get_their_own_checks_and_the_description_says_so():
    check = AccumulationBound("y", lambda inputs: inputs[0].abs(), 2.0 ** -10, why="fp8 partials",
                              others=PerOutput({"s": Tolerance(0.0, 1e-6)}))
    outputs = [Output("y", torch.bfloat16), Output("s", torch.float32)]
    assert check.problem(outputs) is None
    text = check.describe(outputs)
    assert "y: every element within one bfloat16 step" in text and "0.000976562 times" in text
    assert "fp8 partials" in text and "s: every element within 0 + 1e-06" in text
    assert "times the sum of the magnitudes of the products it sums" in text  # the default measure
    y, s = torch.ones(4), torch.ones(2)
    good = check.verdict({"y": y.bfloat16(), "s": s}, {"y": y.bfloat16(), "s": s}, (y,))
    bad = check.verdict({"y": y.bfloat16(), "s": s * 1.01}, {"y": y.bfloat16(), "s": s}, (y,))
    assert good.ok and not bad.ok and bad.message.startswith("s:")


@pytest.mark.parametrize("check, why", [
    (AccumulationBound("z", abs, 1e-3, "t"), "none of the task's outputs"),
    (AccumulationBound("y", abs, 1.5, "t"), "rel must be a float in (0, 1)"),
    (AccumulationBound("y", None, 1e-3, "t"), "terms must be a function"),
    (AccumulationBound("y", abs, 1e-3, "t", measure=" "), "measure must say what terms(inputs) is"),
])
def test_a_bound_that_cannot_apply_is_named(check, why):
    assert why in check.problem([Output("y", torch.bfloat16)])


def test_integer_outputs_are_refused():
    assert "not int32" in AccumulationBound("y", abs, 1e-3, "t").problem([Output("y", torch.int32)])


def test_terms_of_the_wrong_shape_are_the_tasks_error():
    check = AccumulationBound("y", lambda inputs: torch.ones(3), 1e-3, why="t")
    with pytest.raises(ValueError, match="terms"):
        check.verdict({"y": torch.ones(4)}, {"y": torch.ones(4)}, ())
