"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2850037757
Round: honest corpus

Idiom: a libdevice function imported by name (from triton.language.extra.libdevice import rsqrt)."""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt

EPS = 1e-6


@triton.jit
def _fused_add_rmsnorm(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    acc += tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, acc.to(tl.bfloat16), mask=mask)
    inv_rms = rsqrt(tl.sum(acc * acc, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + cols, (acc * inv_rms * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    out = torch.empty_like(x)
    res_out = torch.empty_like(x)
    BLOCK_N = triton.next_power_of_2(N)
    _fused_add_rmsnorm[(M,)](x, residual, weight, out, res_out, N, EPS, BLOCK_N=BLOCK_N,
                             num_warps=max(1, min(16, BLOCK_N // 256)))
    return out, res_out
