"""Wrong: the key loop stops one tile short of the block's causal frontier, dropping the
diagonal tile (key tiles of one page, so the smoke contexts span several tiles)."""

import torch
import triton
import triton.language as tl

# 16 query tokens per block: a decode (one token) fills 1/16 of its tile, a prefill chunk fills it.
# With 4 or 8 query heads per KV head the tile is 64 or 128 rows, the sizes where a [rows, 128] x
# [128, 64] bf16 dot keeps an H100's tensor cores busy; 64 keys per step is four pages.
BLOCK_Q = 16
BLOCK_N = 16
LOG2E = 1.4426950408889634


@triton.jit
def _find_sequence(cu_q_ptr, N, block, BLOCK_Q: tl.constexpr):
    """The last sequence i with cu_q[i] // BLOCK_Q + i <= block (binary search)."""
    lo = 0
    hi = N
    while lo < hi:
        mid = (lo + hi) // 2
        first = tl.load(cu_q_ptr + mid) // BLOCK_Q + mid
        if first <= block:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit
def _unified_attention_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, cu_q_ptr, seq_lens_ptr, o_ptr,
    N, D, qk_scale,
    stride_qt, stride_qh, stride_kp, stride_ks, stride_kh, stride_vp, stride_vs, stride_vh,
    stride_bt, stride_ot, stride_oh,
    G: tl.constexpr, G_PAD: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # BLOCK_M = BLOCK_Q * G_PAD rows: a token's G query heads (padded to a power of two) side by side.
    block = tl.program_id(0)
    kv_head = tl.program_id(1)
    seq = _find_sequence(cu_q_ptr, N, block, BLOCK_Q)
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    local = block - (q_start // BLOCK_Q + seq)
    if local * BLOCK_Q >= q_len:   # past the sequence's last block (the grid is an upper bound)
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    ctx = seq_len - q_len

    rows = tl.arange(0, BLOCK_M)
    tok = local * BLOCK_Q + rows // G_PAD           # token within the sequence's new tokens
    head = kv_head * G + rows % G_PAD
    row_ok = (tok < q_len) & (rows % G_PAD < G)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q_rows = (q_start + tok).to(tl.int64) * stride_qt + head * stride_qh
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    q_pos = ctx + tok                                # each row's own position: its causal frontier
    # The block's frontier: keys past its last token's position are masked for every row.
    kv_end = ctx + tl.minimum((local + 1) * BLOCK_Q, q_len)
    bt_row = bt_ptr + seq.to(tl.int64) * stride_bt
    for start in range(0, tl.maximum(kv_end - BLOCK_N, 1), BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)
        pos_ok = pos < kv_end
        page = tl.load(bt_row + pos // PAGE, mask=pos_ok, other=0).to(tl.int64)
        slot = pos % PAGE
        kv_mask = pos_ok[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + (page * stride_kp + slot * stride_ks + kv_head * stride_kh)[:, None] + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + (page * stride_vp + slot * stride_vs + kv_head * stride_vh)[:, None] + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale         # log2-domain scores
        s = tl.where(pos[None, :] <= q_pos[:, None], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # padded rows see no key at all
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m - m_safe)
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new

    out = acc / tl.where(l == 0.0, 1.0, l)[:, None]
    o_rows = (q_start + tok).to(tl.int64) * stride_ot + head * stride_oh
    tl.store(o_ptr + o_rows[:, None] + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None] & d_ok[None, :])


def forward(q, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens):
    T, Hq, d = q.shape
    _, page, Hkv, _ = k_cache.shape
    N = seq_lens.shape[0]
    assert Hq % Hkv == 0 and q.stride(2) == 1 and k_cache.stride(3) == 1 and v_cache.stride(3) == 1
    G = Hq // Hkv
    G_PAD = triton.next_power_of_2(G)
    o = torch.empty_like(q)
    # Every sequence has at most cdiv(q_len_i, BLOCK_Q) <= q_len_i // BLOCK_Q + 1 blocks.
    grid = (T // BLOCK_Q + N, Hkv)
    _unified_attention_kernel[grid](
        q, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens, o,
        N, d, d ** -0.5 * LOG2E,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0), o.stride(0), o.stride(1),
        G=G, G_PAD=G_PAD, PAGE=page, BLOCK_Q=BLOCK_Q, BLOCK_M=BLOCK_Q * G_PAD, BLOCK_N=BLOCK_N,
        BLOCK_D=max(16, triton.next_power_of_2(d)), num_warps=8 if G_PAD * BLOCK_Q >= 128 else 4,
    )
    return o
