"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1996164788
Round: honest corpus

Idiom: a stride-generic launch: every row stride passed to the kernel, nothing assumes contiguity."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _fused_add_rmsnorm_strided(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    stride_x_row, stride_x_col, stride_r_row, stride_r_col,
    stride_y_row, stride_ro_row, stride_w,
    N, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x_row + cols * stride_x_col, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(res_ptr + row * stride_r_row + cols * stride_r_col, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(res_out_ptr + row * stride_ro_row + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / N + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y_row + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    residual_out = torch.empty((M, N), dtype=residual.dtype, device=x.device)
    BLOCK_N = triton.next_power_of_2(N)
    _fused_add_rmsnorm_strided[(M,)](
        x, residual, weight, y, residual_out,
        x.stride(0), x.stride(1), residual.stride(0), residual.stride(1),
        y.stride(0), residual_out.stride(0), weight.stride(0),
        N, EPS,
        BLOCK_N=BLOCK_N, num_warps=max(1, min(16, BLOCK_N // 256)),
    )
    return y, residual_out
