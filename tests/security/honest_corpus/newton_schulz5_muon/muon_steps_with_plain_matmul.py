"""Task: newton_schulz5_muon
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3650981377
Round: honest corpus

Idiom: a port of the Muon reference's zeropower_via_newtonschulz5 step by step, each torch op a small Triton kernel (tutorial-style batched matmul, elementwise a*P + b*Q, norm by atomic adds)."""

import torch
import triton
import triton.language as tl

# Origin: a port of the Muon reference's zeropower_via_newtonschulz5 step by step: bf16 X, `X.mT` when tall,
# division by the norm plus 1e-7, then five rounds of A = X @ X.mT, B = b * A + c * A @ A, X = a * X + B @ X.
# Written from what that function does, adapted to the task's rule that forward only launches kernels: each
# torch op is a small Triton kernel (a tutorial-style batched matmul on strided views, an elementwise a*P + b*Q,
# and a norm by atomic adds into a zeroed buffer); no symmetry, no fused epilogues.


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                  stride_cb, stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + batch * stride_ab + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_SIZE_K) & (offs_bn[None, :] < N), other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + batch * stride_cb + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


@triton.jit
def axpby_kernel(p_ptr, q_ptr, out_ptr, alpha, beta, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    p = tl.load(p_ptr + offsets, mask=mask).to(tl.float32)
    q = tl.load(q_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * p + beta * q).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def sumsq_kernel(x_ptr, out_ptr, per_matrix, BLOCK_SIZE: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + batch * per_matrix + offsets, mask=offsets < per_matrix, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr + batch, tl.sum(x * x, axis=0))


@triton.jit
def normalize_kernel(x_ptr, sumsq_ptr, out_ptr, rows, cols, stride_r, stride_c, per_matrix, eps,
                     BLOCK_SIZE: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < per_matrix
    norm = tl.sqrt(tl.load(sumsq_ptr + batch))
    x = tl.load(x_ptr + batch * per_matrix + (offsets // cols) * stride_r + (offsets % cols) * stride_c, mask=mask)
    tl.store(out_ptr + batch * per_matrix + offsets, (x.to(tl.float32) / (norm + eps)).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def transpose_copy_kernel(src_ptr, out_ptr, n, per_matrix, BLOCK_SIZE: tl.constexpr):
    # out[r, c] = src[r, c] where src is the transpose of a contiguous [n, m] matrix: element c * m + r
    batch = tl.program_id(1).to(tl.int64)
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < per_matrix
    m = per_matrix // n
    r = offsets // n
    c = offsets % n
    x = tl.load(src_ptr + batch * per_matrix + c * m + r, mask=mask)
    tl.store(out_ptr + batch * per_matrix + offsets, x, mask=mask)


def bmm(a, b, out):
    batch, M, K = a.shape
    N = b.shape[2]
    # Blocks no larger than the operands (16 at least for tl.dot); wider caps on the CPU interpreter,
    # which pays per program and per loop step
    caps = (64, 64, 32) if a.is_cuda else (32, 512, 512)
    BM, BN, BK = (max(16, min(cap, triton.next_power_of_2(size))) for cap, size in zip(caps, (M, N, K)))
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), batch)
    matmul_kernel[grid](a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride(), BLOCK_SIZE_M=BM,
                        BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK)
    return out


def axpby(alpha, p, beta, q, out):
    n = out.numel()
    axpby_kernel[(triton.cdiv(n, 1024),)](p, q, out, alpha, beta, n, BLOCK_SIZE=1024)
    return out


def zeropower_via_newtonschulz5(G, steps=5):
    assert G.ndim >= 2
    a, b, c = (3.4445, -4.7750, 2.0315)
    batch, m, n = G.shape
    transposed = m > n
    rows, cols = (n, m) if transposed else (m, n)
    stride_r, stride_c = (1, n) if transposed else (n, 1)
    sumsq = torch.zeros(batch, dtype=torch.float32, device=G.device)
    sumsq_kernel[(triton.cdiv(m * n, 1024), batch)](G, sumsq, m * n, BLOCK_SIZE=1024)
    X = torch.empty((batch, rows, cols), dtype=torch.bfloat16, device=G.device)
    normalize_kernel[(triton.cdiv(m * n, 1024), batch)](G, sumsq, X, rows, cols, stride_r, stride_c, m * n, 1e-7,
                                                         BLOCK_SIZE=1024)
    A = torch.empty((batch, rows, rows), dtype=torch.bfloat16, device=G.device)
    AA = torch.empty_like(A)
    B = torch.empty_like(A)
    BX = torch.empty_like(X)
    for _ in range(steps):
        bmm(X, X.mT, A)
        bmm(A, A, AA)
        axpby(b, A, c, AA, B)
        bmm(B, X, BX)
        axpby(a, X, 1.0, BX, X)
    if transposed:
        X = X.mT
    return X


def forward(g):
    X = zeropower_via_newtonschulz5(g)
    if X.is_contiguous():
        return X
    # A tall input's result is the transposed view of a [batch, n, m] buffer: copy it out by a kernel
    batch, m, n = g.shape
    out = torch.empty(g.shape, dtype=torch.bfloat16, device=g.device)
    transpose_copy_kernel[(triton.cdiv(m * n, 1024), batch)](X, out, n, m * n, BLOCK_SIZE=1024)
    return out
