"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout4 p19

Honest probe: @triton.autotune (one config with num_warps, keyed on N) over @triton.heuristics,
with a @triton.jit device helper for the row statistic.

Idiom: autotune, heuristics computing a constexpr from the arguments, a device function called
from the kernel, tl.range loops. (One config only: with two or more, Triton's autotuner benchmarks
through the active GPU driver, and a CPU-only host has none: "0 active drivers", a Triton
limitation, not the env's. A multi-config autotune can only be probed on a GPU.)

Task: fused_add_rmsnorm
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def row_sum_sq(x_ptr, r_ptr, base, N, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in tl.range(0, N, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < N
        v = tl.load(x_ptr + base + c, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + base + c, mask=m, other=0.0).to(tl.float32)
        acc += v * v
    return tl.sum(acc, axis=0)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2)],
                 key=["N"])
@triton.heuristics({"EVEN": lambda args: args["N"] % args["BLOCK"] == 0})
@triton.jit
def rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * N
    rstd = tl.rsqrt(row_sum_sq(x_ptr, r_ptr, base, N, BLOCK) / N + eps)
    for start in tl.range(0, N, BLOCK):
        c = start + tl.arange(0, BLOCK)
        if EVEN:
            m = c < N + 1
        else:
            m = c < N
        v = tl.load(x_ptr + base + c, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + base + c, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + c, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
        tl.store(ro_ptr + base + c, v.to(ro_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    rmsnorm_kernel[(M,)](x, residual, weight, y, ro, N, EPS)
    return y, ro
