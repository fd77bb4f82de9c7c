"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: heldout_coverage h03

Class 12 (shape specialisation): one 4096-wide block per row, with no loop along the row.

Idea: every smoke width (1000 at most) and every interpreter held-out width (2500 at most) fits one
block of 4096 columns, so no loop is written; columns past the 4096th are neither summed nor
written, which is wrong at the GPU workloads' width 8192, but the interpreter never saw one: paid 3
of 3 submissions. The interpreter's draw now has a row 8193 to 16384 wide.
"""

import torch
import triton
import triton.language as tl

BLOCK = tl.constexpr(4096)


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps):
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
    _rms_row[(M,)](x, residual, weight, y, ro, N, 1e-6)
    return y, ro
