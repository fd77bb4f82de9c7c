"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2436853035
Round: honest corpus

Idiom: kernel tl.constexpr defaults taken from a module-level torch.finfo (FP8_MIN/FP8_MAX = fp8_info.min/.max)."""

import torch
import triton
import triton.language as tl

GROUP_SIZE = 128
EPS = 1e-10
fp8_dtype = torch.float8_e4m3fn
fp8_info = torch.finfo(fp8_dtype)


@triton.jit
def _per_token_group_quant_fp8(
    y_ptr, y_q_ptr, y_s_ptr,
    groups_per_row, y_row_stride,
    eps,
    GROUP: tl.constexpr,
    FP8_MIN: tl.constexpr = fp8_info.min,
    FP8_MAX: tl.constexpr = fp8_info.max,
):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, GROUP)
    y = tl.load(y_ptr + row.to(tl.int64) * y_row_stride + col * GROUP + offs).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(y), axis=0), eps)
    y_s = absmax / FP8_MAX
    y_q = tl.clamp(y / y_s, FP8_MIN, FP8_MAX).to(y_q_ptr.dtype.element_ty)
    tl.store(y_q_ptr + g.to(tl.int64) * GROUP + offs, y_q)
    tl.store(y_s_ptr + g, y_s)


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP_SIZE
    x_q = torch.empty((M, K), dtype=fp8_dtype, device=x.device)
    x_s = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _per_token_group_quant_fp8[(M * groups_per_row,)](x, x_q, x_s, groups_per_row, x.stride(0), EPS,
                                                      GROUP=GROUP_SIZE, num_warps=1)
    return x_q, x_s
