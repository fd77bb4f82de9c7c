"""Wrong: one weight scale for the whole matrix (the first block's) and one activation scale per row (its
first group's), the per-tensor / per-token recipe where 128x128 and 1x128 blocks are asked."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, stride_asm,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + offs_m[:, None] * K + k + offs_k[None, :], mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptr + offs_n[None, :] * K + k + offs_k[:, None], mask=offs_n[None, :] < N, other=0.0)
        acc += tl.dot(a, b)
    a_s = tl.load(as_ptr + offs_m * stride_asm, mask=offs_m < M, other=0.0)
    acc = acc * a_s[:, None] * tl.load(bs_ptr)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16), mask=mask)


def forward(a, a_scales, b, b_scales):
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _gemm[grid](a, a_scales, b, b_scales, c, M, N, K, a_scales.stride(0), BLOCK_M=32, BLOCK_N=32, BLOCK_K=128)
    return c
