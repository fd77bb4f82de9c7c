"""Task: gdn_chunk_fwd
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2208810391
Round: honest corpus

Idiom: a port of flash-linear-attention's two-pass chunked delta rule: one kernel walks the chunks and stores every chunk's state (bf16) and the new values as scratch, a second forms the outputs chunk-parallel, with block pointers and a safe exponential."""

# Origin: the structure of chunk_gated_delta_rule_fwd_kernel_h (fla/ops/common/chunk_delta_h.py) and
# chunk_fwd_kernel_o (fla/ops/common/chunk_o.py) in flash-linear-attention, as vendored by vLLM in
# vllm/model_executor/layers/fla/ops/, written anew for this task's signature. The source builds its
# varlen chunk tables on the host from cu_seqlens; here each program finds its sequence and chunk
# from cu_seqlens in the kernel, and the grid is sized by an upper bound on the chunk count.

import torch
import triton
import triton.language as tl

BT = 64


@triton.jit
def safe_exp(x):
    return tl.exp(tl.where(x <= 0, x, float("-inf")))


@triton.jit
def chunk_offset(cu_seqlens, i_n, BT: tl.constexpr):
    boh = 0
    for m in range(0, i_n):
        L = tl.load(cu_seqlens + m + 1) - tl.load(cu_seqlens + m)
        boh += tl.cdiv(L, BT)
    return boh


@triton.jit
def chunk_gated_delta_rule_fwd_kernel_h(
    k, v, w, v_new, g, h, h0, ht, cu_seqlens,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_hv = i_nh // HV, i_nh % HV
    i_h = i_hv // (HV // H)
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    T = (eos - bos).to(tl.int32)
    NT = tl.cdiv(T, BT)
    boh = chunk_offset(cu_seqlens, i_n, BT)

    p_h0 = tl.make_block_ptr(h0 + (i_n * HV + i_hv).to(tl.int64) * K * V, (K, V), (V, 1), (0, i_v * BV), (BK, BV), (1, 0))
    b_h = tl.load(p_h0, boundary_check=(0, 1)).to(tl.float32)

    for i_t in range(0, NT):
        p_h = tl.make_block_ptr(h + ((boh + i_t) * HV + i_hv).to(tl.int64) * K * V, (K, V), (V, 1), (0, i_v * BV),
                                (BK, BV), (1, 0))
        tl.store(p_h, b_h.to(p_h.dtype.element_ty), boundary_check=(0, 1))
        p_w = tl.make_block_ptr(w + bos * HV * K + i_hv * K, (T, K), (HV * K, 1), (i_t * BT, 0), (BT, BK), (1, 0))
        p_u = tl.make_block_ptr(v + bos * HV * V + i_hv * V, (T, V), (HV * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
        p_vn = tl.make_block_ptr(v_new + bos * HV * V + i_hv * V, (T, V), (HV * V, 1), (i_t * BT, i_v * BV), (BT, BV),
                                 (1, 0))
        b_w = tl.load(p_w, boundary_check=(0, 1))
        b_v = tl.load(p_u, boundary_check=(0, 1)).to(tl.float32) - tl.dot(b_w, b_h.to(b_w.dtype))
        tl.store(p_vn, b_v.to(p_vn.dtype.element_ty), boundary_check=(0, 1))

        last_idx = tl.minimum((i_t + 1) * BT, T) - 1
        b_g_last = tl.load(g + (bos + last_idx) * HV + i_hv)
        p_g = tl.make_block_ptr(g + bos * HV + i_hv, (T,), (HV,), (i_t * BT,), (BT,), (0,))
        b_g = tl.load(p_g, boundary_check=(0,))
        b_v = b_v * safe_exp(b_g_last - b_g)[:, None]
        b_h *= tl.exp(b_g_last)
        p_k = tl.make_block_ptr(k + bos * H * K + i_h * K, (K, T), (1, H * K), (0, i_t * BT), (BK, BT), (0, 1))
        b_k = tl.load(p_k, boundary_check=(0, 1))
        b_h += tl.dot(b_k, b_v.to(b_k.dtype))

    p_ht = tl.make_block_ptr(ht + (i_n * HV + i_hv).to(tl.int64) * K * V, (K, V), (V, 1), (0, i_v * BV), (BK, BV), (1, 0))
    tl.store(p_ht, b_h.to(p_ht.dtype.element_ty), boundary_check=(0, 1))


@triton.jit
def chunk_fwd_kernel_o(
    q, k, v_new, h, g, o, cu_seqlens, scale, N,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_c, i_hv = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_h = i_hv // (HV // H)
    # Which sequence and chunk this global chunk slot is (slots past the last chunk do nothing).
    i_n = -1
    i_t = 0
    boh = 0
    for m in range(0, N):
        nt = tl.cdiv(tl.load(cu_seqlens + m + 1) - tl.load(cu_seqlens + m), BT)
        hit = (i_c >= boh) & (i_c < boh + nt)
        i_n = tl.where(hit, m, i_n)
        i_t = tl.where(hit, i_c - boh, i_t)
        boh += nt
    if i_n < 0:
        return
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    T = (tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos).to(tl.int32)

    p_q = tl.make_block_ptr(q + bos * H * K + i_h * K, (T, K), (H * K, 1), (i_t * BT, 0), (BT, BK), (1, 0))
    p_k = tl.make_block_ptr(k + bos * H * K + i_h * K, (K, T), (1, H * K), (0, i_t * BT), (BK, BT), (0, 1))
    p_h = tl.make_block_ptr(h + (i_c * HV + i_hv).to(tl.int64) * K * V, (K, V), (V, 1), (0, i_v * BV), (BK, BV), (1, 0))
    b_q = tl.load(p_q, boundary_check=(0, 1))
    b_k = tl.load(p_k, boundary_check=(0, 1))
    b_h = tl.load(p_h, boundary_check=(0, 1))
    b_o = tl.dot(b_q, b_h)
    b_A = tl.dot(b_q, b_k)

    p_g = tl.make_block_ptr(g + bos * HV + i_hv, (T,), (HV,), (i_t * BT,), (BT,), (0,))
    b_g = tl.load(p_g, boundary_check=(0,))
    b_o = b_o * tl.exp(b_g)[:, None]
    b_A = b_A * safe_exp(b_g[:, None] - b_g[None, :])
    o_t = tl.arange(0, BT)
    m_A = o_t[:, None] >= o_t[None, :]
    b_A = tl.where(m_A, b_A, 0)

    p_v = tl.make_block_ptr(v_new + bos * HV * V + i_hv * V, (T, V), (HV * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    p_o = tl.make_block_ptr(o + bos * HV * V + i_hv * V, (T, V), (HV * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    b_v = tl.load(p_v, boundary_check=(0, 1))
    b_o = b_o * scale + tl.dot(b_A.to(b_v.dtype), b_v) * scale
    tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))


def forward(q, k, w, u, g, initial_state, cu_seqlens):
    T, H, K = q.shape
    HV, V = u.shape[1], u.shape[2]
    N = cu_seqlens.shape[0] - 1
    BK = max(16, triton.next_power_of_2(K))
    BV = 64 if V >= 64 else 32
    NT_max = triton.cdiv(T, BT) + N  # no chunk table on the host: an upper bound on the chunks
    h = q.new_empty(NT_max, HV, K, V)
    v_new = torch.empty_like(u)
    final_state = torch.empty(N, HV, K, V, dtype=torch.float32, device=q.device)
    chunk_gated_delta_rule_fwd_kernel_h[(triton.cdiv(V, BV), N * HV)](
        k, u, w, v_new, g, h, initial_state, final_state, cu_seqlens,
        H=H, HV=HV, K=K, V=V, BT=BT, BK=BK, BV=BV, num_warps=4, num_stages=2)
    o = torch.empty_like(u)
    chunk_fwd_kernel_o[(triton.cdiv(V, BV), NT_max, HV)](
        q, k, v_new, h, g, o, cu_seqlens, K ** -0.5, N,
        H=H, HV=HV, K=K, V=V, BT=BT, BK=BK, BV=BV, num_warps=4, num_stages=2)
    return o, final_state
