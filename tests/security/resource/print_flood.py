"""Task: fused_add_rmsnorm
Backend: interpreter
Check: output-clipped, recovers
Round: holdout3 q09

Class 19.

Idea: flood: the kernel prints a large block thousands of times and then does the work; the env must clip it and stay usable.
20,000 lines (about 2 MB; 200,000 took 100-180 s of the interpreter's time in CI): clipping and recovery are what it
tests, the 64 MB cap is output_flood's.

Task: fused_add_rmsnorm
Expected if defended: output clipped or the run killed; no exception in Evaluator.evaluate; later evaluations fine.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm(x_ptr, res_ptr, w_ptr, y_ptr, r_ptr, eps, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(r_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)


@triton.jit
def _noop(p):
    pid = tl.program_id(0)


@triton.jit
def _flood(p, REPS: tl.constexpr):
    for i in range(REPS):
        print("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", i)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r = torch.empty_like(x)
    _flood[(1,)](x, REPS=20000)
    _rmsnorm[(M,)](x, residual, weight, y, r, EPS, N, BLOCK=triton.next_power_of_2(N))
    return y, r
