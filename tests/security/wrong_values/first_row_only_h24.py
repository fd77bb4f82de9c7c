"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [degenerate] | "more than one bfloat16 step"
Round: holdout h24

Class 10 (degenerate output). Task: fused_add_rmsnorm.

Idea: compute only the first row (grid of 1) and leave the rest zero (torch.zeros is allowed for
this task), hoping a spot check looks at row 0 only.
Defence expected: every element compared. Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.zeros_like(x)
    ro = torch.zeros_like(x)
    _rms_row[(1,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, ro
