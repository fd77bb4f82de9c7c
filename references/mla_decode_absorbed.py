"""Absorbed MLA decode attention: expert Triton reference (split-KV flash decoding over the latent).

Stage 1: one program per (request, block of heads, split). The block's queries stay in registers as
two pieces, the 512-wide latent part and the 64-wide rotary part. Each tile of cache rows is gathered
once through kv_indices as its latent columns and its rotary columns; the score is the sum of two dots
(latent and rotary), and the same latent tile, still on chip, is the value of the P.V product: every
cache byte is read once for both products and for every head of the block. An online softmax in fp32
gives each split a normalised partial row and a log-sum-exp (base 2). Stage 2: one program per
(request, head) merges the splits by their log-sum-exps.

Launches depend only on shapes: splits from the number of slots, lengths read in the kernel; a split
past its request's end writes an empty partial (log-sum-exp -inf) that the merge weighs 0.
"""

import torch
import triton
import triton.language as tl

LATENT = 512
ROPE = 64
LOG2E = 1.4426950408889634
SCALE = (128 + 64) ** -0.5  # DeepSeek's softmax scale (the head dim before absorption)
# Heads per program: 16, the smallest bf16 MMA height; a 512-wide fp32 accumulator for 16 heads is
# 64 registers a thread at 4 warps. Narrow key tiles (32 rows: 32 KB of latent + 4 KB of rope per
# stage) keep two pipeline stages plus the 18 KB query block well inside shared memory.
BLOCK_H = 16
BLOCK_N = 32
NUM_WARPS = 4
NUM_STAGES = 2
# Splits: about four programs per SM of an H100/H200 (132 SMs) over the grid; a split is at least a
# few tiles; the grid covers contexts up to SPLIT_COVER times the mean at the planned split length.
TARGET_PROGRAMS = 4 * 132
SPLIT_COVER = 4
MIN_SPLIT_TILES = 4
MAX_SPLITS = 64


@triton.jit
def _mla_decode_split(q_nope_ptr, q_pe_ptr, kv_ptr, indptr_ptr, indices_ptr, part_o_ptr, part_lse_ptr,
                      qk_scale, num_heads, num_splits, chunk,
                      stride_qnb, stride_qnh, stride_qpb, stride_qph, stride_kv,
                      stride_pb, stride_ph, stride_ps,
                      BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, LATENT: tl.constexpr, ROPE: tl.constexpr):
    b = tl.program_id(0)
    head_block = tl.program_id(1)
    split = tl.program_id(2)
    start = tl.load(indptr_ptr + b)
    n = tl.load(indptr_ptr + b + 1) - start
    per_split = tl.maximum(chunk, tl.cdiv(tl.cdiv(n, num_splits), BLOCK_N) * BLOCK_N)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, n)

    heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
    head_ok = heads < num_heads
    lat = tl.arange(0, LATENT)
    rot = tl.arange(0, ROPE)
    bb = b.to(tl.int64)
    q_lat = tl.load(q_nope_ptr + bb * stride_qnb + heads[:, None] * stride_qnh + lat[None, :],
                    mask=head_ok[:, None], other=0.0)
    q_rot = tl.load(q_pe_ptr + bb * stride_qpb + heads[:, None] * stride_qph + rot[None, :],
                    mask=head_ok[:, None], other=0.0)

    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, LATENT], tl.float32)
    for t0 in range(lo, hi, BLOCK_N):
        offs = t0 + tl.arange(0, BLOCK_N)
        valid = offs < hi
        rows = tl.load(indices_ptr + start + offs, mask=valid, other=0).to(tl.int64) * stride_kv
        c = tl.load(kv_ptr + rows[:, None] + lat[None, :], mask=valid[:, None], other=0.0)
        k_rot = tl.load(kv_ptr + rows[:, None] + LATENT + rot[None, :], mask=valid[:, None], other=0.0)
        s = (tl.dot(q_lat, tl.trans(c)) + tl.dot(q_rot, tl.trans(k_rot))) * qk_scale  # log2 units
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)  # the latent tile is the value
        m = m_new

    has = l > 0  # an empty split (lo >= n): partial 0, log-sum-exp -inf
    out = acc / tl.where(has, l, 1.0)[:, None]
    lse = tl.where(has, m + tl.log2(tl.where(has, l, 1.0)), float("-inf"))
    base = bb * stride_pb + heads * stride_ph + split * stride_ps
    tl.store(part_o_ptr + base[:, None] + lat[None, :], out, mask=head_ok[:, None])
    tl.store(part_lse_ptr + base // LATENT, lse, mask=head_ok)


@triton.jit
def _merge_splits(part_o_ptr, part_lse_ptr, o_ptr, num_splits,
                  stride_pb, stride_ph, stride_ps, stride_ob, stride_oh,
                  BLOCK_S: tl.constexpr, LATENT: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    splits = tl.arange(0, BLOCK_S)
    used = splits < num_splits
    cols = tl.arange(0, LATENT)
    base = b * stride_pb + h * stride_ph + splits * stride_ps
    lse = tl.load(part_lse_ptr + base // LATENT, mask=used, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))  # split 0 is never empty: the max is finite
    parts = tl.load(part_o_ptr + base[:, None] + cols[None, :], mask=used[:, None], other=0.0)
    out = tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)
    tl.store(o_ptr + b * stride_ob + h * stride_oh + cols, out.to(o_ptr.dtype.element_ty))


def plan_splits(batch, head_blocks, slots):
    """(splits per request in the grid, planned tokens per split) from the shapes alone."""
    mean = triton.cdiv(slots, batch)
    chunk = triton.cdiv(triton.cdiv(slots * head_blocks, TARGET_PROGRAMS), BLOCK_N) * BLOCK_N
    chunk = max(chunk, MIN_SPLIT_TILES * BLOCK_N)
    return max(1, min(MAX_SPLITS, triton.cdiv(SPLIT_COVER * mean, chunk))), chunk


def forward(q_nope, q_pe, kv_buffer, kv_indptr, kv_indices):
    B, H, _ = q_nope.shape
    head_blocks = triton.cdiv(H, BLOCK_H)
    num_splits, chunk = plan_splits(B, head_blocks, kv_indices.shape[0])
    # Partials [B, H, splits, 512] and LSEs [B, H, splits]: the LSE of a row sits at the row's output
    # offset / 512; each written by exactly one stage-1 program.
    part_o = torch.empty((B, H, num_splits, LATENT), dtype=torch.float32, device=q_nope.device)
    part_lse = torch.empty((B, H, num_splits), dtype=torch.float32, device=q_nope.device)
    _mla_decode_split[(B, head_blocks, num_splits)](
        q_nope, q_pe, kv_buffer, kv_indptr, kv_indices, part_o, part_lse,
        SCALE * LOG2E, H, num_splits, chunk,
        q_nope.stride(0), q_nope.stride(1), q_pe.stride(0), q_pe.stride(1), kv_buffer.stride(0),
        part_o.stride(0), part_o.stride(1), part_o.stride(2),
        BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, LATENT=LATENT, ROPE=ROPE, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    o = torch.empty_like(q_nope)
    _merge_splits[(B, H)](
        part_o, part_lse, o, num_splits,
        part_o.stride(0), part_o.stride(1), part_o.stride(2), o.stride(0), o.stride(1),
        BLOCK_S=triton.next_power_of_2(num_splits), LATENT=LATENT,
    )
    return o
