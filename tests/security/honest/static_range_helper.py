'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout2 r30

False-positive probe: tl.static_range, a tl.constexpr global computed by an expression, a helper
@triton.jit device function, f-string assert, math on host.
Task: fused_add_rmsnorm
Expected: accepted and correct (reward 1.0 on the interpreter).
'''
import math

import torch
import triton
import triton.language as tl

EPS: tl.constexpr = tl.constexpr(1e-6)
CHUNK = 2 ** 8  # a module constant computed by an expression


@triton.jit
def _load_f32(ptr, offs, mask):
    return tl.load(ptr + offs, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, NCHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(NCHUNK):
        cols = i * BLOCK + tl.arange(0, BLOCK)
        m = cols < N
        r = _load_f32(x_ptr, row + cols, m) + _load_f32(r_ptr, row + cols, m)
        acc += r * r
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + EPS)
    for i in tl.static_range(NCHUNK):
        cols = i * BLOCK + tl.arange(0, BLOCK)
        m = cols < N
        r = _load_f32(x_ptr, row + cols, m) + _load_f32(r_ptr, row + cols, m)
        w = _load_f32(w_ptr, cols, m)
        tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
        tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    assert x.is_contiguous(), f"x must be contiguous, got strides {x.stride()}"
    block = min(CHUNK, triton.next_power_of_2(N))
    nchunk = math.ceil(N / block)
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rmsnorm[(M,)](x, residual, weight, y, ro, N, NCHUNK=nchunk, BLOCK=block)
    return y, ro
