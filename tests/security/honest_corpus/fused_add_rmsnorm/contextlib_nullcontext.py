"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1156354815
Round: honest corpus

Idiom: `from contextlib import nullcontext`: a device guard on CUDA tensors, a no-op context elsewhere."""

from contextlib import nullcontext

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    BLOCK_N = triton.next_power_of_2(N)
    guard = torch.cuda.device(x.device) if x.is_cuda else nullcontext()
    with guard:
        _rmsnorm_kernel[(M,)](x, residual, weight, y, residual_out, N, EPS, BLOCK_N=BLOCK_N,
                              num_warps=max(1, min(16, BLOCK_N // 256)))
    return y, residual_out
