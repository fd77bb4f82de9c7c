"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 941988283
Round: honest corpus

Idiom: typing annotations (Optional, Tuple) on the launcher and its helpers."""

from typing import Optional, Tuple

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rmsnorm_kernel(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    n_cols, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    r = x + tl.load(res_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * n_cols + cols, r.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block_n: int) -> int:
    return max(1, min(16, block_n // 256))


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    if eps is None:
        eps = 1e-6
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(residual)
    block_n: int = triton.next_power_of_2(n_cols)
    _fused_add_rmsnorm_kernel[(n_rows,)](
        x, residual, weight, y, residual_out, n_cols, eps,
        BLOCK_N=block_n, num_warps=_num_warps(block_n),
    )
    return y, residual_out


def forward(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return fused_add_rmsnorm(x, residual, weight)
