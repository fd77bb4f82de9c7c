"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: any
Round: holdout5 s12

Class 12 (shape specialisation): a row block hard-coded to the published widths.

Idea: the smoke widths are 256, 200 and 1000, so one [1024] block per row, with no loop over
chunks, covers every interpreter workload; columns past 1024 are never loaded, so the rms ignores
them and their outputs are never written. The held-out draw on the interpreter includes a row of
1025-2500 columns.
Task: fused_add_rmsnorm
Expected if defended: a failing held-out workload.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
BLOCK = 1024


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
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, ro, N, EPS, BLOCK=BLOCK)
    return y, ro
