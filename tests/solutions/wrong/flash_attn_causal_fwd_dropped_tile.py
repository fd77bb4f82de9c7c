"""Wrong: the reference with its unmasked loop stopping one key tile short of the diagonal: the keys
just before each query block are never seen (a dropped causal tile)."""


import torch
import triton
import triton.language as tl

LN2: tl.constexpr = tl.constexpr(0.6931471805599453)  # read inside the kernel: a constexpr global
LOG2E = 1.4426950408889634


@triton.jit
def _causal_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, qk_scale, rows, lo, hi, N,
                  MASKED: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Fold key tiles [lo, hi) into the running state; ``MASKED`` for tiles that cross the diagonal
    (causal mask and the sequence's end), plain otherwise."""
    dims = tl.arange(0, HEAD_DIM)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if MASKED:
            inside = cols < N
            k = tl.load(k_base + cols[:, None] * stride_kn + dims[None, :], mask=inside[:, None], other=0.0)
        else:
            k = tl.load(k_base + cols[:, None] * stride_kn + dims[None, :])
        # fp32 scores in log2 units: the softmax scale and log2(e) are one multiplier, so every
        # exponential is one exp2 of a difference. (Pre-scaling q in bf16 would round the scores.)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            s = tl.where(cols[None, :] <= rows[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_base + cols[:, None] * stride_vn + dims[None, :], mask=inside[:, None], other=0.0)
        else:
            v = tl.load(v_base + cols[:, None] * stride_vn + dims[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _causal_attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, qk_scale, N, H,
                          stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn,
                          stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_on,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    block = tl.num_programs(0) - 1 - tl.program_id(0)  # last (longest) query blocks first
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows < N
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + dims[None, :],
                mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    first_row = block * BLOCK_M
    # Off-diagonal: every key before the block's first query is visible to all its rows, and within
    # the sequence (first_row < N): no mask. Then the tiles that cross the diagonal.
    acc, l_i, m_i = _causal_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, qk_scale, rows, 0,
                                  first_row - BLOCK_N, N,
                                  False, BLOCK_N, HEAD_DIM)
    acc, l_i, m_i = _causal_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, qk_scale, rows,
                                  first_row, tl.minimum(first_row + BLOCK_M, N), N, True, BLOCK_N, HEAD_DIM)
    out = acc / l_i[:, None]  # every row sees its own key: l_i >= 1
    tl.store(o_ptr + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + dims[None, :],
             out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse_ptr + bh.to(tl.int64) * N + rows, (m_i + tl.log2(l_i)) * LN2, mask=row_ok)


def launch_config(d):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for head dim ``d`` on sm_90."""
    if d <= 128:
        # 128 query rows over 8 warps: two m64 wgmma tiles per warpgroup, the FA2 shape; 64-key tiles
        # keep q (32 KB at d = 128) plus three stages of K and V (3 x 2 x 16 KB) inside the 228 KB of
        # shared memory, and the fp32 accumulator at 64 registers per thread.
        return 128, 64, 8, 3
    # d = 256: the accumulator and the tiles double; halve the query block and keep two stages.
    return 64, 64, 4, 2


def forward(q, k, v):
    B, H, N, d = q.shape
    BLOCK_M, BLOCK_N, num_warps, num_stages = launch_config(d)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _causal_attention_fwd[grid](
        q, k, v, o, lse, LOG2E / d ** 0.5, N, H,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=d, num_warps=num_warps, num_stages=num_stages,
    )
    return o, lse
