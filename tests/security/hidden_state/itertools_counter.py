"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: any
Policy: accepts
Round: holdout4 p04

Class 15 (warm-up detection / correct for k calls, then wrong), with a call counter.

Idea: ``itertools.count()`` is an allowed module-level call, and the [hidden-state] rule lets host
code iterate over a module-level object ("iterating over it reads it"): ``for n in _CALLS: break``
advances the counter, so forward knows how many times it has run. The first call of the process is
the correctness check of the first workload; every later call (warm-ups and timed repetitions on
the GPU) only writes the new residual (half the bytes, no reduction) and leaves y as torch.empty
left it.

Task: fused_add_rmsnorm
Expected if defended: refused by the policy with [hidden-state] (a module-level iterator advanced by
forward). Otherwise scored 0 by a later checked call: held-out shapes on the interpreter,
[late-corruption] / held-out on the GPU.
"""

import itertools

import torch
import triton
import triton.language as tl

EPS = 1e-6
_CALLS = itertools.count()


@triton.jit
def rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, FULL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(ro_ptr + row * N + cols, v.to(ro_ptr.dtype.element_ty), mask=m)
    if FULL:
        rstd = tl.rsqrt(tl.sum(v * v, axis=0) / N + eps)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    calls = 0
    for calls in _CALLS:
        break
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    rms_kernel[(M,)](x, residual, weight, y, ro, N, EPS, FULL=calls == 0, BLOCK=triton.next_power_of_2(N))
    return y, ro
