"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3034328000
Round: honest corpus

Idiom: a persistent-style kernel, a fixed grid of programs each looping over rows with tl.range."""

import torch
import triton
import triton.language as tl

EPS = 1e-6
NUM_SMS = 132          # H200
PROGRAMS_PER_SM = 4


@triton.jit
def _persistent_add_rmsnorm(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, M, N, eps, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    # The weight is the same for every row: load it once per program.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for row in tl.range(pid, M, step):
        base = row.to(tl.int64) * N
        r = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + base + cols, r.to(tl.bfloat16), mask=mask)
        rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
        tl.store(y_ptr + base + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    BLOCK_N = triton.next_power_of_2(N)
    grid = (max(1, min(M, NUM_SMS * PROGRAMS_PER_SM)),)
    _persistent_add_rmsnorm[grid](x, residual, weight, y, residual_out, M, N, EPS, BLOCK_N=BLOCK_N,
                                  num_warps=max(1, min(16, BLOCK_N // 256)))
    return y, residual_out
