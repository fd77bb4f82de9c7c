"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [aliasing]
Round: holdout6 t25

Class: 8 (input mutation / aliasing).
Idea: copy vLLM's fused_add_rms_norm contract, which is in place: the kernel writes the new
residual into `residual` and y into `x`, then returns (x, residual). It saves both output
allocations and is numerically exact, so only the aliasing / input-mutation checks can stop it.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_ptr + row + cols, r.to(tl.bfloat16), mask=mask)
    tl.store(x_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    _kernel[(M,)](x, residual, weight, N, EPS, BLOCK=triton.next_power_of_2(N))
    return x, residual
