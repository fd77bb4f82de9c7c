"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: heldout_coverage h02

Class 12 (shape specialisation): a large-batch path that is wrong, taken from 78 rows on.

Idea: below 78 rows, one program per row (right); from 78 rows on, a "batched" path with two rows
per program that takes one mean of squares over both rows, so every pair of rows shares an rstd.
Every smoke workload has at most 8 rows, and the interpreter's held-out draw had 48 to 96: paid 5 of
8 submissions (those that drew fewer than 78 rows). The draw now always has a shape with 97 rows or
more.
"""

import torch
import triton
import triton.language as tl

BATCHED_FROM = 78


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_row_pairs(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N, eps, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * 2 + tl.arange(0, 2)
    cols = tl.arange(0, BLOCK)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows[:, None] * N + cols[None, :]
    r = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r) / (2 * N) + eps)  # one statistic for both rows
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (r * rstd * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + offs, r.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    if M < BATCHED_FROM:
        _rms_row[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=block)
    else:
        _rms_row_pairs[(triton.cdiv(M, 2),)](x, residual, weight, y, ro, M, N, 1e-6, BLOCK=block)
    return y, ro
