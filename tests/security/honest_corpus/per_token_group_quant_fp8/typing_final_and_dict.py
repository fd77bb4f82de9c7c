"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2040035179
Round: honest corpus

Idiom: typing.Final constants and Dict/Tuple annotations on a config table."""

from typing import Dict, Final, Tuple

import torch
import triton
import triton.language as tl

GROUP_SIZE: Final[int] = 128
FP8_MAX: Final[float] = 448.0
EPS: Final[float] = 1e-10
# groups per program -> warps
WARPS_FOR_BLOCK: Final[Dict[int, int]] = {1: 1, 2: 1, 4: 1, 8: 2, 16: 4}


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


def _launch(n_groups: int) -> Tuple[int, int]:
    block_g = 16 if n_groups >= 4096 else 4
    return block_g, WARPS_FOR_BLOCK[block_g]


def forward(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    M, K = x.shape
    groups_per_row: int = K // GROUP_SIZE
    n_groups: int = M * groups_per_row
    block_g, num_warps = _launch(n_groups)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[(triton.cdiv(n_groups, block_g),)](x, q, scales, n_groups, groups_per_row, x.stride(0), EPS,
                                                     FP8_MAX, GROUP=GROUP_SIZE, BLOCK_G=block_g,
                                                     num_warps=num_warps)
    return q, scales
