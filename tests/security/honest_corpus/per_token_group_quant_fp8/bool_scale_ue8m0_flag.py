"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3119060773
Round: honest corpus

Idiom: a bool kernel argument (use_ue8m0, off for this task) tested with `if` to round scales to powers of two."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _per_token_group_quant_fp8(x_ptr, q_ptr, s_ptr, groups_per_row, stride_xm, eps, fp8_max,
                               use_ue8m0, GROUP: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    if use_ue8m0:
        scale = tl.exp2(tl.ceil(tl.log2(scale)))
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + offs, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def per_token_group_quant_fp8(x, group_size=GROUP, use_ue8m0=False):
    M, K = x.shape
    groups_per_row = K // group_size
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _per_token_group_quant_fp8[(M * groups_per_row,)](x, q, scales, groups_per_row, x.stride(0), EPS, FP8_MAX,
                                                      use_ue8m0, GROUP=group_size, num_warps=1)
    return q, scales


def forward(x):
    return per_token_group_quant_fp8(x)
