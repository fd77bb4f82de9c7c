"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 958764177
Round: honest corpus

Idiom: a frozen dataclass holding the launch parameters, under `from __future__ import annotations`."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

EPS = 1e-6


@dataclass(frozen=True)
class LaunchParams:
    block_n: int
    num_warps: int

    @staticmethod
    def for_width(n_cols: int) -> LaunchParams:
        block_n = triton.next_power_of_2(n_cols)
        return LaunchParams(block_n=block_n, num_warps=max(1, min(16, block_n // 256)))


@triton.jit
def _rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    r = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32) \
        + tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + offs, r.to(tl.bfloat16), mask=mask)
    var = tl.sum(r * r, axis=0) / N
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + offs, (r * tl.rsqrt(var + eps) * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    params = LaunchParams.for_width(N)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _rmsnorm_kernel[(M,)](x, residual, weight, y, residual_out, N, EPS,
                          BLOCK_N=params.block_n, num_warps=params.num_warps)
    return y, residual_out
