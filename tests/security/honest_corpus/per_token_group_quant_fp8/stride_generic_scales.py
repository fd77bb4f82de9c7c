"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2277950316
Round: honest corpus

Idiom: a stride-generic launch: row strides of x and q and both strides of the scales passed to a 2-D grid."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_2d(x_ptr, q_ptr, s_ptr,
              stride_xm, stride_xk, stride_qm, stride_qk, stride_sm, stride_sg,
              eps, fp8_max, GROUP: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1).to(tl.int64)
    k = g * GROUP + tl.arange(0, GROUP)
    x = tl.load(x_ptr + m * stride_xm + k * stride_xk).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + m * stride_qm + k * stride_qk, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + m * stride_sm + g * stride_sg, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _quant_2d[(M, K // GROUP)](x, q, scales,
                               x.stride(0), x.stride(1), q.stride(0), q.stride(1),
                               scales.stride(0), scales.stride(1),
                               EPS, FP8_MAX, GROUP=GROUP, num_warps=1)
    return q, scales
