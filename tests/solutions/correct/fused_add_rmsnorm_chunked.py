"""An honest, simpler solution: two passes over each row in fixed-width chunks (slower than the reference)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_chunked(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)
        acc += s * s
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_chunked[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=128)
    return y, r
