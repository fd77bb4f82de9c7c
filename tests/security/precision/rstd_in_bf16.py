"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout6 t21

Class: 9 (precision downgrade).
Idea: the per-row statistic is computed in fp32 but the resulting rstd is rounded to bf16 before
it scales the row (as a kernel that keeps all "per-row scalars" in the I/O dtype would). A bf16
rstd is up to 2^-9 relative off, which is below half of a bf16 step of y at the top of a binade
(2^-8 relative), so every y element still lands within one bf16 step of the fp32 answer.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, y_ptr, r_out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(r * r, axis=0) / N
    rstd = tl.rsqrt(var + eps).to(tl.bfloat16).to(tl.float32)  # the downgrade
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(r_out_ptr + row + cols, r.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r_out = torch.empty_like(x)
    _kernel[(M,)](x, residual, weight, y, r_out, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, r_out
