"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout5 s15

Honest probe: @triton.autotune (one config: with two, Triton's interpreter has no driver to benchmark
with and raises, whatever the env does) stacked on @triton.heuristics, with a grid lambda
reading the chosen meta-parameters, and reset_to_zero on an fp32 sum-of-squares scratch buffer
accumulated with tl.atomic_add across column chunks.
Task: fused_add_rmsnorm
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.autotune(configs=[triton.Config({"CHUNK": 256})], key=["N"],
                 reset_to_zero=["ss_ptr"])
@triton.heuristics({"EVEN": lambda args: args["N"] % args["CHUNK"] == 0})
@triton.jit
def _sumsq(x_ptr, r_ptr, ss_ptr, N, CHUNK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    if EVEN:
        r = tl.load(x_ptr + row * N + cols).to(tl.float32) + tl.load(r_ptr + row * N + cols).to(tl.float32)
    else:
        m = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    tl.atomic_add(ss_ptr + row, tl.sum(r * r, axis=0))


@triton.jit
def _normalise(x_ptr, r_ptr, w_ptr, ss_ptr, y_ptr, ro_ptr, N, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    rstd = tl.rsqrt(tl.load(ss_ptr + row) / N + eps)
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        m = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
        tl.store(ro_ptr + row * N + cols, r.to(ro_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    ss = torch.zeros((M,), dtype=torch.float32, device=x.device)
    _sumsq[lambda meta: (M, triton.cdiv(N, meta["CHUNK"]))](x, residual, ss, N)
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _normalise[(M,)](x, residual, weight, ss, y, ro, N, EPS, CHUNK=512)
    return y, ro
