"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Mode: test
Workloads: all
Round: redteam (honest, slow)

Honest but slow: one program per (row, column tile). Every program re-reads its whole row in chunks
to get the sum of squares, then normalises only its own tile, so the row is read once per tile. Must
PASS every workload (no false positive).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_tile(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    tile = tl.program_id(1)
    acc = tl.zeros([TILE], dtype=tl.float32)
    for start in range(0, N, TILE):
        cols = start + tl.arange(0, TILE)
        mask = cols < N
        s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        acc += s * s
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    cols = tile * TILE + tl.arange(0, TILE)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    TILE = 64
    _rmsnorm_tile[(M, triton.cdiv(N, TILE))](x, residual, weight, y, r, N, 1e-6, TILE=TILE)
    return y, r
