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
