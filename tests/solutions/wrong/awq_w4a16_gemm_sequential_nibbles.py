"""Wrong: reads column 8j + c from nibble c (the sequential, GPTQ-style order) instead of AWQ's 0, 4, 1, 5,
2, 6, 3, 7: every weight but those of columns 8j and 8j + 7 comes from another column."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(x_ptr, qw_ptr, qz_ptr, s_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok, n_ok = offs_m < M, offs_n < N
    shifts = (offs_n % 8) * 4
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * K + ks[None, :], mask=m_ok[:, None], other=0.0)
        q = tl.load(qw_ptr + ks[:, None] * (N // 8) + offs_n[None, :] // 8, mask=n_ok[None, :], other=0)
        z = tl.load(qz_ptr + (k // 128) * (N // 8) + offs_n // 8, mask=n_ok, other=0)
        s = tl.load(s_ptr + (k // 128) * N + offs_n, mask=n_ok, other=0.0).to(tl.float32)
        w = ((((q >> shifts[None, :]) & 0xF) - ((z >> shifts) & 0xF)[None, :]).to(tl.float32) * s[None, :])
        acc = tl.dot(x, w.to(tl.float16), acc)
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16), mask=m_ok[:, None] & n_ok[None, :])


def forward(x, qweight, qzeros, scales):
    M, K = x.shape
    N = scales.shape[1]
    y = torch.empty((M, N), dtype=torch.float16, device=x.device)
    _gemm[(triton.cdiv(M, 16), triton.cdiv(N, 32))](x, qweight, qzeros, scales, y, M, N, K, BLOCK_M=16, BLOCK_N=32,
                                                     BLOCK_K=64)
    return y
