"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3045246182
Round: honest corpus

Idiom: multiple kernels, one writing per-row statistics (rstd) and a second applying them."""

import torch
import triton
import triton.language as tl

EPS = 1e-6
BLOCK_ROWS = 4


@triton.jit
def _add_and_rstd_kernel(x_ptr, res_ptr, res_out_ptr, rstd_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)
    tl.store(rstd_ptr + row, tl.rsqrt(tl.sum(r * r, axis=0) / N + eps))


@triton.jit
def _apply_rstd_kernel(x_ptr, res_ptr, w_ptr, rstd_ptr, y_ptr, M, N,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
    # The unrounded fp32 sum again, so y is rounded to bf16 only once.
    r = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + rows, mask=rows < M, other=0.0)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (r * rstd[:, None] * w[None, :]).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    BLOCK_N = triton.next_power_of_2(N)
    num_warps = max(1, min(16, BLOCK_N // 256))
    _add_and_rstd_kernel[(M,)](x, residual, residual_out, rstd, N, EPS, BLOCK_N=BLOCK_N, num_warps=num_warps)
    _apply_rstd_kernel[(triton.cdiv(M, BLOCK_ROWS),)](x, residual, weight, rstd, y, M, N, BLOCK_M=BLOCK_ROWS,
                                                       BLOCK_N=BLOCK_N, num_warps=num_warps)
    return y, residual_out
