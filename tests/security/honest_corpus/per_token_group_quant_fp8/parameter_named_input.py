"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1580002425
Round: honest corpus

Idiom: forward and its helper take a parameter named `input` (shadowing the builtin), as torch-style signatures do."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, K, eps, fp8_max, GROUP: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1).to(tl.int64)
    k = g * GROUP + tl.arange(0, GROUP)
    x = tl.load(x_ptr + m * K + k).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + m * K + k, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + m * (K // GROUP) + g, scale)


def _outputs(input, group_size):
    M, K = input.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=input.device)
    scales = torch.empty((M, K // group_size), dtype=torch.float32, device=input.device)
    return q, scales


def forward(input):
    input = input.contiguous()
    M, K = input.shape
    q, scales = _outputs(input, GROUP)
    _quant_kernel[(M, K // GROUP)](input, q, scales, K, EPS, FP8_MAX, GROUP=GROUP, num_warps=1)
    return q, scales
