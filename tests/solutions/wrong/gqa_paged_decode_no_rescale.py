"""Wrong: the reference without the online-softmax rescale of its running output when the maximum
grows (the denominator is still rescaled): tiles seen before a larger score weigh too much."""


import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
# Tiles: 64 slots of K and V per step (2 x 16 KB of bf16 at d = 128) keep two stages of the
# pipeline in shared memory with room to spare; the q group is padded to 16 rows (the smallest
# bf16 MMA height), so a group of 4 or 8 wastes rows but not bandwidth: the kernel is memory-bound.
BLOCK_N = 64
MIN_GROUP_ROWS = 16
NUM_WARPS = 4
NUM_STAGES = 2
# Splits: aim for about four programs per SM of an H100/H200 (132 SMs) over the whole batch, so
# that enough independent row gathers are in flight to cover HBM latency; a split is at least
# MIN_SPLIT_TILES tiles, as a shorter one costs more in partials and merging than it saves. The grid has enough splits per request for contexts up to SPLIT_COVER times the mean at
# that size; longer ones get longer splits, shorter ones leave their last splits empty.
TARGET_PROGRAMS = 4 * 132
SPLIT_COVER = 4
MIN_SPLIT_TILES = 4
MAX_SPLITS = 64


@triton.jit
def _decode_split(q_ptr, k_ptr, v_ptr, indptr_ptr, indices_ptr, part_o_ptr, part_lse_ptr,
                  qk_scale, num_splits, chunk,
                  stride_qb, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                  stride_pb, stride_ph, stride_ps,
                  GROUP: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    start = tl.load(indptr_ptr + b)
    n = tl.load(indptr_ptr + b + 1) - start
    # This request's split length: the planned chunk, or longer if the request needs more than the
    # grid's splits at that size; whole tiles, so only a split's last tile is partial.
    per_split = tl.maximum(chunk, tl.cdiv(tl.cdiv(n, num_splits), BLOCK_N) * BLOCK_N)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, n)

    rows = tl.arange(0, BLOCK_H)
    heads = kv_head * GROUP + rows
    row_ok = rows < GROUP
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + dims[None, :],
                mask=row_ok[:, None], other=0.0)

    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    for t0 in range(lo, hi, BLOCK_N):
        offs = t0 + tl.arange(0, BLOCK_N)
        valid = offs < hi
        # int64 slot offsets: slot * stride overflows int32 in a pool of millions of slots.
        slots = tl.load(indices_ptr + start + offs, mask=valid, other=0).to(tl.int64)
        k = tl.load(k_ptr + slots[:, None] * stride_kt + kv_head * stride_kh + dims[None, :],
                    mask=valid[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # log2 units: scale * log2(e) folded in
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + slots[:, None] * stride_vt + kv_head * stride_vh + dims[None, :],
                    mask=valid[:, None], other=0.0)
        acc = acc + tl.dot(p.to(v.dtype), v)  # the fault: the running sum is never rescaled
        m = m_new

    # An empty split (lo >= n) leaves l = 0: its partial is 0 with log-sum-exp -inf.
    has = l > 0
    out = acc / tl.where(has, l, 1.0)[:, None]
    lse = tl.where(has, m + tl.log2(tl.where(has, l, 1.0)), float("-inf"))
    base = b.to(tl.int64) * stride_pb + heads * stride_ph + split * stride_ps
    tl.store(part_o_ptr + base[:, None] + dims[None, :], out, mask=row_ok[:, None])
    tl.store(part_lse_ptr + base // HEAD_DIM, lse, mask=row_ok)


@triton.jit
def _merge_splits(part_o_ptr, part_lse_ptr, o_ptr, num_splits,
                  stride_pb, stride_ph, stride_ps, stride_ob, stride_oh,
                  BLOCK_S: tl.constexpr, HEAD_DIM: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    splits = tl.arange(0, BLOCK_S)
    used = splits < num_splits
    dims = tl.arange(0, HEAD_DIM)
    base = b * stride_pb + h * stride_ph + splits * stride_ps
    lse = tl.load(part_lse_ptr + base // HEAD_DIM, mask=used, other=float("-inf"))
    # The first split of a request is never empty (every request has a token): the max is finite.
    w = tl.exp2(lse - tl.max(lse, 0))
    parts = tl.load(part_o_ptr + base[:, None] + dims[None, :], mask=used[:, None], other=0.0)
    out = tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)
    tl.store(o_ptr + b * stride_ob + h * stride_oh + dims, out.to(o_ptr.dtype.element_ty))


def plan_splits(batch, kv_heads, slots):
    """(splits per request in the grid, planned tokens per split) from the shapes alone."""
    mean = triton.cdiv(slots, batch)
    chunk = triton.cdiv(triton.cdiv(slots * kv_heads, TARGET_PROGRAMS), BLOCK_N) * BLOCK_N
    chunk = max(chunk, MIN_SPLIT_TILES * BLOCK_N)
    return max(1, min(MAX_SPLITS, triton.cdiv(SPLIT_COVER * mean, chunk))), chunk


def forward(q, k_buffer, v_buffer, kv_indptr, kv_indices):
    B, Hq, d = q.shape
    Hkv = k_buffer.shape[1]
    group = Hq // Hkv
    num_splits, chunk = plan_splits(B, Hkv, kv_indices.shape[0])
    # Partials: [B, Hq, splits, d] outputs and [B, Hq, splits] LSEs sharing one index (the LSE of a
    # row sits at the row's output offset / d), each written by exactly one stage-1 program.
    part_o = torch.empty((B, Hq, num_splits, d), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B, Hq, num_splits), dtype=torch.float32, device=q.device)
    _decode_split[(B, Hkv, num_splits)](
        q, k_buffer, v_buffer, kv_indptr, kv_indices, part_o, part_lse,
        LOG2E / d ** 0.5, num_splits, chunk,
        q.stride(0), q.stride(1), k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1),
        part_o.stride(0), part_o.stride(1), part_o.stride(2),
        GROUP=group, BLOCK_H=max(MIN_GROUP_ROWS, triton.next_power_of_2(group)), BLOCK_N=BLOCK_N, HEAD_DIM=d,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    o = torch.empty_like(q)
    _merge_splits[(B, Hq)](
        part_o, part_lse, o, num_splits,
        part_o.stride(0), part_o.stride(1), part_o.stride(2), o.stride(0), o.stride(1),
        BLOCK_S=triton.next_power_of_2(num_splits), HEAD_DIM=d,
    )
    return o
