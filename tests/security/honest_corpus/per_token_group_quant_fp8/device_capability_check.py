"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 738095770
Round: honest corpus

Idiom: torch.cuda.get_device_capability(x.device) checked for fp8 support (sm_89 or newer) before launching."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, groups_per_row, stride_xm, eps, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + offs, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    major, minor = torch.cuda.get_device_capability(x.device)
    if (major, minor) < (8, 9):
        raise RuntimeError(f"float8_e4m3fn needs compute capability 8.9 or newer, got {major}.{minor}")
    M, K = x.shape
    groups_per_row = K // GROUP
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    with torch.cuda.device(x.device):
        _quant_kernel[(M * groups_per_row,)](x, q, scales, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP,
                                             num_warps=1)
    return q, scales
