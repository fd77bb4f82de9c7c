"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 893080837
Round: honest corpus

Idiom: a module logger from logging.getLogger(__name__) with .debug calls in the launcher."""

import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)

EPS = 1e-6


@triton.jit
def fused_add_rmsnorm_kernel(X, R, W, Y, R_OUT, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    R += row * stride
    Y += row * stride
    R_OUT += row * stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + cols, mask=mask, other=0.0).to(tl.float32)
    s = x + r
    tl.store(R_OUT + cols, s.to(R_OUT.dtype.element_ty), mask=mask)
    mean_sq = tl.sum(s * s, axis=0) / N
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + cols, (s * rstd * w).to(Y.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    BLOCK_SIZE = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK_SIZE // 256, 1), 16)
    logger.debug("fused_add_rmsnorm: M=%d N=%d BLOCK_SIZE=%d num_warps=%d", M, N, BLOCK_SIZE, num_warps)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(residual)
    fused_add_rmsnorm_kernel[(M,)](x, residual, weight, y, residual_out, x.stride(0), N, EPS,
                                   BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    logger.debug("fused_add_rmsnorm: launched %d programs", M)
    return y, residual_out
