'''Task: fused_add_rmsnorm
Backend: static
Policy: accepts
Round: holdout2 r35

False-positive probe: tl.reduce with a custom @triton.jit combine function, itertools/functools
on the host, a module constant from math, a launch through functools.partial.
Task: fused_add_rmsnorm
Expected: accepted and correct.
'''
import functools
import itertools
import math

import torch
import triton
import triton.language as tl

INV_LN2 = 1.0 / math.log(2.0)
EPS = 1e-6


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.reduce(r * r, 0, _add) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    block = next(b for b in itertools.accumulate(itertools.repeat(2, 20), lambda a, b: a * b) if b >= N)
    launch = functools.partial(_rmsnorm[(M,)], BLOCK=block)
    launch(x, residual, weight, y, ro, N, EPS)
    return y, ro
