"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2727084993
Round: honest corpus

Idiom: a module logger whose debug message is built only when logger.isEnabledFor(logging.DEBUG)."""

import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, groups_per_row, stride_xm, eps, fp8_max,
                  GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gm = groups < n_groups
    row = groups // groups_per_row
    col = groups % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64)[:, None] * stride_xm + (col * GROUP)[:, None] + offs[None, :],
                mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + groups.to(tl.int64)[:, None] * GROUP + offs[None, :], q.to(q_ptr.dtype.element_ty),
             mask=gm[:, None])
    tl.store(s_ptr + groups, scale, mask=gm)


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP
    n_groups = M * groups_per_row
    BLOCK_G = 8
    grid = (triton.cdiv(n_groups, BLOCK_G),)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("per_token_group_quant_fp8: x=%s groups=%d grid=%s", tuple(x.shape), n_groups, grid)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[grid](x, q, scales, n_groups, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP,
                        BLOCK_G=BLOCK_G, num_warps=2)
    return q, scales
