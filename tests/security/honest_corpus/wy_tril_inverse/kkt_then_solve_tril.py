"""Task: wy_tril_inverse
Backend: interpreter
Expect: paid
Policy: accepts
Seed: 175257144
Round: honest corpus

Idiom: a port in the style of flash-linear-attention (fla/ops/common/chunk_scaled_dot_kkt.py, then fla/ops/utils/solve_tril.py): A written to HBM by one kernel, then 16x16 diagonal inverses by row substitution re-reading A's rows and a merge into 64x64, written from their approach; chunk indices found in-kernel instead of prepare_chunk_indices."""

import torch
import triton
import triton.language as tl

BT = tl.constexpr(64)


@triton.jit
def locate_chunk(cu_seqlens, i_t, S, BS: tl.constexpr):
    o_s = tl.arange(0, BS)
    bos_all = tl.load(cu_seqlens + o_s, mask=o_s < S, other=0)
    eos_all = tl.load(cu_seqlens + o_s + 1, mask=o_s < S, other=0)
    n_chunks = tl.cdiv(eos_all - bos_all, BT)
    ends = tl.cumsum(n_chunks, 0)
    hit = (ends - n_chunks <= i_t) & (i_t < ends)
    found = tl.sum(hit.to(tl.int32), 0)
    bos = tl.sum(tl.where(hit, bos_all + (i_t - (ends - n_chunks)) * BT, 0), 0).to(tl.int64)
    eos = tl.sum(tl.where(hit, eos_all, 0), 0).to(tl.int64)
    return found, bos, eos


@triton.jit
def chunk_scaled_dot_kkt_fwd_kernel(k, g, beta, A, cu_seqlens, S, H, K: tl.constexpr, BS: tl.constexpr):
    i_t, i_h = tl.program_id(0), tl.program_id(1)
    found, bos, eos = locate_chunk(cu_seqlens, i_t, S, BS)
    if found > 0:
        o_t = bos + tl.arange(0, BT)
        m_t = o_t < eos
        o_k = tl.arange(0, K)
        b_k = tl.load(k + (o_t * H + i_h)[:, None] * K + o_k[None, :], mask=m_t[:, None], other=0.)
        b_beta = tl.load(beta + o_t * H + i_h, mask=m_t, other=0.)
        b_g = tl.load(g + o_t * H + i_h, mask=m_t, other=0.)
        b_kb = (b_k * b_beta[:, None]).to(b_k.dtype)
        b_A = tl.dot(b_kb, tl.trans(b_k))
        o_i = tl.arange(0, BT)
        m_A = (o_i[:, None] > o_i[None, :]) & m_t[:, None] & m_t[None, :]
        b_A = tl.where(m_A, b_A * tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], 0.)), 0.)
        tl.store(A + (o_t * H + i_h)[:, None] * BT + o_i[None, :], b_A, mask=m_t[:, None])


@triton.jit
def solve_tril_16x16(A, row0, eos, H, i_h, col0):
    # Inverse of (I + A) on the 16x16 diagonal block whose first row is row0: rows of -A re-read
    # from HBM one at a time and folded into the rows above.
    o_i = tl.arange(0, 16)
    m_r = row0 + o_i < eos
    b_A = tl.load(A + ((row0 + o_i) * H + i_h)[:, None] * BT + col0 + o_i[None, :], mask=m_r[:, None], other=0.)
    b_A = -tl.where(o_i[:, None] > o_i[None, :], b_A, 0.)
    for i in range(2, 16):
        b_a = -tl.load(A + ((row0 + i) * H + i_h) * BT + col0 + o_i, mask=row0 + i < eos, other=0.)
        b_a = tl.where(o_i < i, b_a, 0.)
        b_a = b_a + tl.sum(b_a[:, None] * b_A, 0)
        b_A = tl.where((o_i == i)[:, None], b_a, b_A)
    return b_A + (o_i[:, None] == o_i[None, :]).to(tl.float32)


@triton.jit
def load_block(A, row0, eos, H, i_h, col0):
    o_i = tl.arange(0, 16)
    return tl.load(A + ((row0 + o_i) * H + i_h)[:, None] * BT + col0 + o_i[None, :], mask=(row0 + o_i < eos)[:, None],
                   other=0.)


@triton.jit
def store_block(Ai, b, row0, eos, H, i_h, col0):
    o_i = tl.arange(0, 16)
    tl.store(Ai + ((row0 + o_i) * H + i_h)[:, None] * BT + col0 + o_i[None, :], b, mask=(row0 + o_i < eos)[:, None])


@triton.jit
def merge_16x16_to_64x64_inverse_kernel(A, Ai, cu_seqlens, S, H, BS: tl.constexpr):
    i_t, i_h = tl.program_id(0), tl.program_id(1)
    found, bos, eos = locate_chunk(cu_seqlens, i_t, S, BS)
    if found > 0:
        Ai_11 = solve_tril_16x16(A, bos, eos, H, i_h, 0)
        Ai_22 = solve_tril_16x16(A, bos + 16, eos, H, i_h, 16)
        Ai_33 = solve_tril_16x16(A, bos + 32, eos, H, i_h, 32)
        Ai_44 = solve_tril_16x16(A, bos + 48, eos, H, i_h, 48)
        A_21 = load_block(A, bos + 16, eos, H, i_h, 0)
        A_31 = load_block(A, bos + 32, eos, H, i_h, 0)
        A_32 = load_block(A, bos + 32, eos, H, i_h, 16)
        A_41 = load_block(A, bos + 48, eos, H, i_h, 0)
        A_42 = load_block(A, bos + 48, eos, H, i_h, 16)
        A_43 = load_block(A, bos + 48, eos, H, i_h, 32)
        Ai_21 = -tl.dot(tl.dot(Ai_22, A_21, input_precision="ieee"), Ai_11, input_precision="ieee")
        Ai_32 = -tl.dot(tl.dot(Ai_33, A_32, input_precision="ieee"), Ai_22, input_precision="ieee")
        Ai_43 = -tl.dot(tl.dot(Ai_44, A_43, input_precision="ieee"), Ai_33, input_precision="ieee")
        Ai_31 = -tl.dot(Ai_33, tl.dot(A_31, Ai_11, input_precision="ieee") + tl.dot(A_32, Ai_21, input_precision="ieee"),
                        input_precision="ieee")
        Ai_42 = -tl.dot(Ai_44, tl.dot(A_42, Ai_22, input_precision="ieee") + tl.dot(A_43, Ai_32, input_precision="ieee"),
                        input_precision="ieee")
        Ai_41 = -tl.dot(Ai_44, tl.dot(A_41, Ai_11, input_precision="ieee") + tl.dot(A_42, Ai_21, input_precision="ieee")
                        + tl.dot(A_43, Ai_31, input_precision="ieee"), input_precision="ieee")
        zero = tl.zeros([16, 16], dtype=tl.float32)
        store_block(Ai, Ai_11, bos, eos, H, i_h, 0)
        store_block(Ai, zero, bos, eos, H, i_h, 16)
        store_block(Ai, zero, bos, eos, H, i_h, 32)
        store_block(Ai, zero, bos, eos, H, i_h, 48)
        store_block(Ai, Ai_21, bos + 16, eos, H, i_h, 0)
        store_block(Ai, Ai_22, bos + 16, eos, H, i_h, 16)
        store_block(Ai, zero, bos + 16, eos, H, i_h, 32)
        store_block(Ai, zero, bos + 16, eos, H, i_h, 48)
        store_block(Ai, Ai_31, bos + 32, eos, H, i_h, 0)
        store_block(Ai, Ai_32, bos + 32, eos, H, i_h, 16)
        store_block(Ai, Ai_33, bos + 32, eos, H, i_h, 32)
        store_block(Ai, zero, bos + 32, eos, H, i_h, 48)
        store_block(Ai, Ai_41, bos + 48, eos, H, i_h, 0)
        store_block(Ai, Ai_42, bos + 48, eos, H, i_h, 16)
        store_block(Ai, Ai_43, bos + 48, eos, H, i_h, 32)
        store_block(Ai, Ai_44, bos + 48, eos, H, i_h, 48)


def forward(k, beta, g, cu_seqlens):
    B, T, H, K = k.shape
    S = cu_seqlens.numel() - 1
    NT = T // 64 + S
    BS = triton.next_power_of_2(S + 1)
    A = torch.empty(B, T, H, 64, dtype=torch.float32, device=k.device)
    chunk_scaled_dot_kkt_fwd_kernel[(NT, H)](k, g, beta, A, cu_seqlens, S, H, K=K, BS=BS)
    Ai = torch.empty_like(A)
    merge_16x16_to_64x64_inverse_kernel[(NT, H)](A, Ai, cu_seqlens, S, H, BS=BS)
    return Ai
