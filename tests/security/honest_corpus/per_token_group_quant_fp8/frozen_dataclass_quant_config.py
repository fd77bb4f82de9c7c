"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 253610532
Round: honest corpus

Idiom: a frozen dataclass of quantisation parameters (group size, fp8 max, eps) with a default instance."""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class QuantConfig:
    group_size: int = 128
    fp8_max: float = 448.0
    eps: float = 1e-10
    groups_per_program: int = 4


DEFAULT_CONFIG = QuantConfig()


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


def quantize(x, cfg=DEFAULT_CONFIG):
    M, K = x.shape
    groups_per_row = K // cfg.group_size
    n_groups = M * groups_per_row
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[(triton.cdiv(n_groups, cfg.groups_per_program),)](
        x, q, scales, n_groups, groups_per_row, x.stride(0), cfg.eps, cfg.fp8_max,
        GROUP=cfg.group_size, BLOCK_G=cfg.groups_per_program)
    return q, scales


def forward(x):
    return quantize(x)
