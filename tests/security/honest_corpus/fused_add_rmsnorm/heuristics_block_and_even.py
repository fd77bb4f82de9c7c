"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2262425735
Round: honest corpus

Idiom: @triton.heuristics deriving BLOCK_N (triton.next_power_of_2) and an EVEN_N flag from the arguments."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.heuristics({
    "BLOCK_N": lambda args: triton.next_power_of_2(args["N"]),
    "EVEN_N": lambda args: args["N"] == triton.next_power_of_2(args["N"]),
})
@triton.jit
def _fused_add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps,
                              BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    if EVEN_N:
        r = tl.load(x_ptr + row * N + cols).to(tl.float32) + tl.load(res_ptr + row * N + cols).to(tl.float32)
        tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16))
        w = tl.load(w_ptr + cols).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
        tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16))
    else:
        mask = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
        tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _fused_add_rmsnorm_kernel[(M,)](x, residual, weight, y, residual_out, N, EPS,
                                    num_warps=max(1, min(16, triton.next_power_of_2(N) // 256)))
    return y, residual_out
