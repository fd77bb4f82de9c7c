"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 204439666
Round: honest corpus

Idiom: multiple kernels, the first computing every group's scale, the second quantising with it."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _group_scales_kernel(x_ptr, s_ptr, groups_per_row, stride_xm, eps, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + tl.arange(0, GROUP)).to(tl.float32)
    tl.store(s_ptr + g, tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max)


@triton.jit
def _apply_scales_kernel(x_ptr, s_ptr, q_ptr, groups_per_row, stride_xm, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + offs).to(tl.float32)
    scale = tl.load(s_ptr + g)
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + offs, q.to(q_ptr.dtype.element_ty))


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP
    n_groups = M * groups_per_row
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _group_scales_kernel[(n_groups,)](x, scales, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP,
                                      num_warps=1)
    _apply_scales_kernel[(n_groups,)](x, scales, q, groups_per_row, x.stride(0), FP8_MAX, GROUP=GROUP,
                                      num_warps=1)
    return q, scales
