"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3791315221
Round: honest corpus

Idiom: bool kernel arguments (not constexpr) tested with `if` inside the kernel."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps,
                    has_residual, has_weight, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    if has_residual:
        h += tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * N + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
    y = h * tl.rsqrt(tl.sum(h * h, axis=0) / N + eps)
    if has_weight:
        y = y * tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight=None, residual=None, eps=EPS):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x) if residual is not None else None
    BLOCK_N = triton.next_power_of_2(N)
    _rmsnorm_kernel[(M,)](
        x, residual if residual is not None else x, weight if weight is not None else x, y,
        residual_out if residual_out is not None else y, N, eps,
        residual is not None, weight is not None,
        BLOCK_N=BLOCK_N, num_warps=max(1, min(16, BLOCK_N // 256)),
    )
    return y, residual_out


def forward(x, residual, weight):
    return rms_norm(x, weight, residual)
