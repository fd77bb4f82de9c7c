"""Wrong: GPT-J style pairing (element 2i with 2i+1) instead of neox halves (i with i + d/2)."""

import torch
import triton
import triton.language as tl

# Heads per tile. At d = 128 a tile is [16 heads, 64] per half: 1024 values per half, 8 per thread
# over 4 warps, so each half of a head is a 128-byte line and a thread issues 16-byte loads. Hq = 32
# or 64 then takes 2 or 4 tiles and Hkv = 8 one (half masked): enough loads in flight per program,
# and T = 8192-16384 tokens give 60-120 programs per SM of an H100 to hide HBM latency.
MAX_BLOCK_H = 16
NUM_WARPS = 4


@triton.jit
def _rotate_heads(x_ptr, stride_t, stride_h, stride_d, t, n_heads, half, cos, sin,
                  BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    """Rotate heads [0, n_heads) of token t in place by (cos, sin), [1, BLOCK_HALF] fp32 each."""
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_HALF)
    d_mask = offs_d < half
    row = x_ptr + t * stride_t
    for h0 in range(0, n_heads, BLOCK_H):
        heads = h0 + offs_h
        mask = (heads < n_heads)[:, None] & d_mask[None, :]
        lo = row + heads[:, None] * stride_h + (2 * offs_d[None, :]) * stride_d
        hi = lo + stride_d
        x1 = tl.load(lo, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(hi, mask=mask, other=0.0).to(tl.float32)
        tl.store(lo, (x1 * cos - x2 * sin).to(x_ptr.dtype.element_ty), mask=mask)
        tl.store(hi, (x2 * cos + x1 * sin).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_qk_kernel(pos_ptr, q_ptr, k_ptr, cache_ptr, Hq, Hkv, half,
                    stride_qt, stride_qh, stride_qd, stride_kt, stride_kh, stride_kd, stride_cp, stride_cd,
                    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)        # int64: T * Hq * d passes 2^31 at long contexts
    pos = tl.load(pos_ptr + t).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_HALF)
    d_mask = offs_d < half
    # The token's cos/sin row, loaded once and reused by all of its q and k heads.
    cache_row = cache_ptr + pos * stride_cp
    cos = tl.load(cache_row + offs_d * stride_cd, mask=d_mask, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(cache_row + (half + offs_d) * stride_cd, mask=d_mask, other=0.0).to(tl.float32)[None, :]
    _rotate_heads(q_ptr, stride_qt, stride_qh, stride_qd, t, Hq, half, cos, sin, BLOCK_HQ, BLOCK_HALF)
    _rotate_heads(k_ptr, stride_kt, stride_kh, stride_kd, t, Hkv, half, cos, sin, BLOCK_HK, BLOCK_HALF)


def forward(positions, q, k, cos_sin_cache):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    half = d // 2
    # Heads per tile from the head counts (powers of two: a block shape), capped so that wide
    # models loop over tiles rather than spill registers.
    block_hq = min(triton.next_power_of_2(Hq), MAX_BLOCK_H)
    block_hk = min(triton.next_power_of_2(Hkv), MAX_BLOCK_H)
    if T > 0:
        _rope_qk_kernel[(T,)](
            positions, q, k, cos_sin_cache, Hq, Hkv, half,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            cos_sin_cache.stride(0), cos_sin_cache.stride(1),
            BLOCK_HQ=block_hq, BLOCK_HK=block_hk, BLOCK_HALF=triton.next_power_of_2(half), num_warps=NUM_WARPS,
        )
    return ()
