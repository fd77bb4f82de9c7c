"""Task: fused_add_rmsnorm
Backend: cuda
Expect: any
Behind the policy: [late-corruption]
Mode on cuda: benchmark
Round: redteam c02

THREATS class 2 (output replay keyed by shape): compute honestly on the first call of each shape and
replay the cached outputs for every later call of the same shape.

GPU only: on the GPU the timed calls repeat the shape, so every timed call replays the correctness
call's outputs and the re-check after the timed loop must fail ([late-corruption]). On the CPU every
call is a different shape, so each call is a miss and the correctness call sees an honest result.
"""

import torch
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    key = tuple(x.shape)
    if key in _CACHE:
        _nothing[(1,)](weight, BLOCK=16)
        return _CACHE[key]
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_rows[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    _CACHE[key] = (y, r)
    return y, r
