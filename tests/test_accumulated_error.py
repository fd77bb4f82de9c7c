"""The accumulated-error checker (d2k_env.tasks.accumulated_error): a GEMM accumulated in fp32 in
another order, or with its output rounded, passes; one accumulated in bf16 per K block, or with one
element far off, or NaN, fails."""

import pytest
import torch

from d2k_env.tasks.accumulated_error import AccumulatedError

CHECK = AccumulatedError(rtol=2.0 ** -7, max_fraction=0.06, rms_fraction=0.008, why="test")
K_BLOCK = 64


@pytest.fixture(scope="module")
def gemm():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 4096, generator=g).bfloat16()
    b = (torch.randn(4096, 256, generator=g) * 4096 ** -0.5).bfloat16()
    return a, b, (a.double() @ b.double()).bfloat16()


def blocked(a, b, acc_dtype):
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=acc_dtype)
    for s in range(0, a.shape[1], K_BLOCK):
        acc = (acc.float() + a[:, s:s + K_BLOCK].float() @ b[s:s + K_BLOCK].float()).to(acc_dtype)
    return acc.bfloat16()


def test_fp32_accumulation_in_blocks_passes(gemm):
    a, b, expected = gemm
    result = CHECK.verdict("y", blocked(a, b, torch.float32), expected)
    assert result.ok, result.message


def test_bf16_accumulation_fails_on_the_rms(gemm):
    a, b, expected = gemm
    result = CHECK.verdict("y", blocked(a, b, torch.bfloat16), expected)
    assert not result.ok and "RMS error" in result.message


@pytest.mark.parametrize("n, passes", [(64, True), (65536, False)])
def test_the_rms_bound_widens_only_for_small_outputs(n, passes):
    """An RMS error of 0.0085 of the output's RMS: inside the bound on 64 elements (a noisy estimate,
    the bound x1.5), outside it on 65536 (x1.016); each element is well inside its own bound."""
    expected = torch.ones(n, dtype=torch.float64)
    out = expected.clone()
    out[0::2] += 0.0085
    out[1::2] -= 0.0085
    result = CHECK.verdict("y", out, expected)
    assert result.ok is passes, result.message


def test_one_element_far_off_fails(gemm):
    _, _, expected = gemm
    bad = expected.clone()
    bad[3, 7] += 0.5 * expected.double().pow(2).mean().sqrt().item()
    result = CHECK.verdict("y", bad, expected)
    assert not result.ok and "1 of" in result.message


def test_nan_fails(gemm):
    _, _, expected = gemm
    bad = expected.clone()
    bad[0, 0] = float("nan")
    assert not CHECK.verdict("y", bad, expected).ok


def test_integer_outputs_are_refused():
    assert CHECK.problem(torch.int32) and CHECK.problem(torch.bfloat16) is None


def _fp8_moe(task_id="fused_moe_fp8_blockwise"):
    from d2k_env.task import load_task
    task = load_task(task_id)
    w = task.workload("T11_E6_k3_N256_K384", smoke=True)
    return task, task.make_inputs(w, torch.Generator().manual_seed(5), torch.device("cpu"))


def _block_gemm(inputs, a_scale_of, w_scale_of, operand_dtype=torch.float32):
    """out[t, j] from per-K-block products, with the scales the callbacks give (vectorised)."""
    a_q, a_s, w_q, w_s, ids = inputs
    T, K = a_q.shape
    E, N, _ = w_q.shape
    out = torch.zeros(T, ids.shape[1], N)
    for b in range(K // 128):
        a = a_q[:, b * 128:(b + 1) * 128].float() * a_scale_of(a_s, b)[:, None]
        w = w_q[:, :, b * 128:(b + 1) * 128].float() * w_scale_of(w_s, b)[:, :, None]
        a, w = a.to(operand_dtype).float(), w.to(operand_dtype).float()
        out += torch.einsum("tc,tjnc->tjn", a, w[ids.long()])
    return out.bfloat16()


def test_fp8_moe_honest_block_scaling_passes_and_shortcuts_fail():
    task, inputs = _fp8_moe()
    import importlib.util
    spec = importlib.util.spec_from_file_location("fp8_moe_baseline", task.baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    expected = baseline.forward(*inputs)
    per_block = lambda w_s, b: w_s[:, :, b].repeat_interleave(128, dim=1)  # noqa: E731
    honest = _block_gemm(inputs, lambda a_s, b: a_s[:, b], per_block)
    assert task.checker((honest,), (expected,), inputs).ok
    bf16_operands = _block_gemm(inputs, lambda a_s, b: a_s[:, b], per_block, torch.bfloat16)
    result = task.checker((bf16_operands,), (expected,), inputs)
    assert not result.ok and "RMS error" in result.message
    per_tensor = _block_gemm(inputs, lambda a_s, b: a_s.amax().expand(a_s.shape[0]),
                             lambda w_s, b: w_s.amax().expand(w_s.shape[0], w_s.shape[1] * 128))
    assert not task.checker((per_tensor,), (expected,), inputs).ok
