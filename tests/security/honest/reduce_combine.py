"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout5 s18

Honest probe: the row statistic through tl.reduce with a @triton.jit combine function, a chunk
loop over a constexpr-power-of-two tile with builtin min() in the kernel, outputs in one [2, M, N]
allocation returned as its two unbind() views, and a grid function computed from the input shape.
Task: fused_add_rmsnorm
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
MAX_CHUNK = tl.constexpr(1024)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _rms(x_ptr, r_ptr, w_ptr, out_ptr, M, N, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        m = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        acc += r * r
    rstd = tl.rsqrt(tl.reduce(acc, 0, _add) / N + eps)
    plane = M * N
    for start in range(0, N, min(CHUNK, MAX_CHUNK)):
        cols = start + tl.arange(0, CHUNK)
        m = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
        tl.store(out_ptr + plane + row * N + cols, r.to(tl.bfloat16), mask=m)


def _grid(meta):
    return (meta["M"],)


def forward(x, residual, weight):
    M, N = x.shape
    both = torch.empty((2, M, N), dtype=x.dtype, device=x.device)
    chunk = min(MAX_CHUNK, triton.next_power_of_2(N))
    _rms[_grid](x, residual, weight, both, M, N, EPS, CHUNK=chunk)
    y, ro = both.unbind(0)
    return y, ro
