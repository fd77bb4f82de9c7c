"""(I + A)^-1 per chunk and head, A = strictly-lower(beta * K K^T * exp(g_i - g_j)): expert Triton reference.

One program owns one (chunk, head) and never writes A: it forms the 64 x 64 matrix as a 4 x 4 grid
of 16 x 16 blocks straight from the keys (bf16 dots, exact products, fp32 accumulation), inverts the
four diagonal blocks by forward substitution in registers, and assembles the six blocks below the
diagonal by block substitution,
    X_ab = -X_aa (A_ab X_bb + A_a,b+1 X_b+1,b + ... + A_a,a-1 X_a-1,b),
with fp32 ("ieee") dots: tf32 would round each product to 11 bits, and the block products compound
that error into the residual. Every byte moved is the keys, beta and g in, the inverse out.

Varlen: the grid has an upper bound of chunks (T // 64 + S) per head; each program finds its
sequence and chunk from cu_seqlens inside the kernel (a cumulative sum of chunk counts over the
sequences), so the launch depends only on shapes, and programs past the last chunk exit.
"""

import torch
import triton
import triton.language as tl

CHUNK = tl.constexpr(64)
SUB = tl.constexpr(16)   # diagonal block size: tl.dot's smallest tile; four per chunk


@triton.jit
def _load_rows(k_ptr, beta_ptr, g_ptr, t0, end, h, H, a, D: tl.constexpr):
    """Keys [SUB, D] (bf16), beta and g [SUB] (fp32) of the chunk's a-th block of rows; rows past the
    chunk's end load as zeros, so they add nothing to A."""
    t = t0 + a * SUB + tl.arange(0, SUB)
    live = t < end
    d = tl.arange(0, D)
    k = tl.load(k_ptr + ((t * H + h) * D)[:, None] + d[None, :], mask=live[:, None], other=0.0)
    beta = tl.load(beta_ptr + t * H + h, mask=live, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + t * H + h, mask=live, other=0.0)
    return k, beta, g


@triton.jit
def _a_block(k_i, beta_i, g_i, k_j, g_j, DIAGONAL: tl.constexpr):
    """A's block for rows i, columns j: beta_i (k_i . k_j) exp(g_i - g_j), strictly lower on the diagonal."""
    r = tl.arange(0, SUB)
    dots = tl.dot(k_i, tl.trans(k_j))          # bf16 operands: exact products, fp32 sums
    if DIAGONAL:
        lower = r[:, None] > r[None, :]
    else:
        lower = r[:, None] >= 0
    # Only below the diagonal is g_i - g_j <= 0: mask the exponent, not just the result.
    decay = tl.exp(tl.where(lower, g_i[:, None] - g_j[None, :], 0.0))
    return tl.where(lower, beta_i[:, None] * dots * decay, 0.0)


@triton.jit
def _invert_unit_lower(L):
    """(I + L)^-1 for a strictly lower [SUB, SUB] L: row i = e_i - sum_j L[i, j] X[j], rows in order."""
    r = tl.arange(0, SUB)
    X = (r[:, None] == r[None, :]).to(tl.float32)
    for i in range(1, SUB):
        l_i = tl.sum(tl.where(r[:, None] == i, L, 0.0), axis=0)          # row i of L, over j
        x_i = tl.sum(l_i[:, None] * X, axis=0)                           # l_i^T X (rows j < i are final)
        X = tl.where(r[:, None] == i, X - x_i[None, :], X)
    return X


@triton.jit
def _mm(a, b):
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _store_block(out_ptr, X, t0, end, h, H, a, b):
    rows = t0 + a * SUB + tl.arange(0, SUB)
    cols = b * SUB + tl.arange(0, SUB)
    tl.store(out_ptr + ((rows * H + h) * CHUNK)[:, None] + cols[None, :], X, mask=(rows < end)[:, None])


@triton.jit
def _wy_inverse_kernel(k_ptr, beta_ptr, g_ptr, cu_ptr, out_ptr, H, S,
                       D: tl.constexpr, BLOCK_S: tl.constexpr):
    c = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    # Which sequence and chunk: chunk counts per sequence, their running sum, the one holding c.
    s = tl.arange(0, BLOCK_S)
    lo = tl.load(cu_ptr + s, mask=s < S, other=0)
    hi = tl.load(cu_ptr + s + 1, mask=s < S, other=0)
    count = (hi - lo + CHUNK - 1) // CHUNK
    upto = tl.cumsum(count, 0)
    mine = (upto - count <= c) & (c < upto)
    if tl.sum(mine.to(tl.int32), axis=0) > 0:
        t0 = tl.sum(tl.where(mine, lo + (c - (upto - count)) * CHUNK, 0), axis=0).to(tl.int64)
        end = tl.sum(tl.where(mine, hi, 0), axis=0).to(tl.int64)

        k0, b0, g0 = _load_rows(k_ptr, beta_ptr, g_ptr, t0, end, h, H, 0, D)
        k1, b1, g1 = _load_rows(k_ptr, beta_ptr, g_ptr, t0, end, h, H, 1, D)
        k2, b2, g2 = _load_rows(k_ptr, beta_ptr, g_ptr, t0, end, h, H, 2, D)
        k3, b3, g3 = _load_rows(k_ptr, beta_ptr, g_ptr, t0, end, h, H, 3, D)

        # Diagonal blocks, inverted in registers.
        X00 = _invert_unit_lower(_a_block(k0, b0, g0, k0, g0, True))
        X11 = _invert_unit_lower(_a_block(k1, b1, g1, k1, g1, True))
        X22 = _invert_unit_lower(_a_block(k2, b2, g2, k2, g2, True))
        X33 = _invert_unit_lower(_a_block(k3, b3, g3, k3, g3, True))
        # Off-diagonal blocks of A.
        A10 = _a_block(k1, b1, g1, k0, g0, False)
        A20 = _a_block(k2, b2, g2, k0, g0, False)
        A21 = _a_block(k2, b2, g2, k1, g1, False)
        A30 = _a_block(k3, b3, g3, k0, g0, False)
        A31 = _a_block(k3, b3, g3, k1, g1, False)
        A32 = _a_block(k3, b3, g3, k2, g2, False)
        # Block substitution, one sub-diagonal at a time.
        X10 = -_mm(X11, _mm(A10, X00))
        X21 = -_mm(X22, _mm(A21, X11))
        X32 = -_mm(X33, _mm(A32, X22))
        X20 = -_mm(X22, _mm(A20, X00) + _mm(A21, X10))
        X31 = -_mm(X33, _mm(A31, X11) + _mm(A32, X21))
        X30 = -_mm(X33, _mm(A30, X00) + _mm(A31, X10) + _mm(A32, X20))

        zero = tl.zeros([SUB, SUB], dtype=tl.float32)
        _store_block(out_ptr, X00, t0, end, h, H, 0, 0)
        _store_block(out_ptr, zero, t0, end, h, H, 0, 1)
        _store_block(out_ptr, zero, t0, end, h, H, 0, 2)
        _store_block(out_ptr, zero, t0, end, h, H, 0, 3)
        _store_block(out_ptr, X10, t0, end, h, H, 1, 0)
        _store_block(out_ptr, X11, t0, end, h, H, 1, 1)
        _store_block(out_ptr, zero, t0, end, h, H, 1, 2)
        _store_block(out_ptr, zero, t0, end, h, H, 1, 3)
        _store_block(out_ptr, X20, t0, end, h, H, 2, 0)
        _store_block(out_ptr, X21, t0, end, h, H, 2, 1)
        _store_block(out_ptr, X22, t0, end, h, H, 2, 2)
        _store_block(out_ptr, zero, t0, end, h, H, 2, 3)
        _store_block(out_ptr, X30, t0, end, h, H, 3, 0)
        _store_block(out_ptr, X31, t0, end, h, H, 3, 1)
        _store_block(out_ptr, X32, t0, end, h, H, 3, 2)
        _store_block(out_ptr, X33, t0, end, h, H, 3, 3)


def forward(k, beta, g, cu_seqlens):
    _, T, H, D = k.shape
    S = cu_seqlens.numel() - 1
    assert k.is_contiguous() and beta.is_contiguous() and g.is_contiguous()
    out = torch.empty((1, T, H, 64), dtype=torch.float32, device=k.device)
    # At most T // 64 + S chunks: each sequence adds at most one partial chunk.
    grid = (T // 64 + S, H)
    _wy_inverse_kernel[grid](k, beta, g, cu_seqlens, out, H, S, D=D, BLOCK_S=triton.next_power_of_2(S + 1),
                             num_warps=4)
    return out
