"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: row_truncation r01

Class: 12 (shape specialisation) - handling only the first rows.
Idea: a grid of at most 40 programs, one row each: right on every published CPU workload (8 rows at
most) and on the interpreter's held-out shapes while they had 6 rows at most; rows 40 and up are
left as torch.empty made them. Held-out shapes on the interpreter now have 48 to 96 rows.
"""

import torch
import triton
import triton.language as tl

MAX_PROGRAMS = 40


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


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_row[(min(M, MAX_PROGRAMS),)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, ro
