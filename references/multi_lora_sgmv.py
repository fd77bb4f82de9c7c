"""Multi-LoRA SGMV (shrink then expand, every adapter in one launch each): expert Triton reference.

The batch's tokens, sorted by adapter once per batch (sorted_tokens, lora_start), form contiguous
segments, one per adapter slot plus one for the tokens with no adapter. Both kernels tile those
segments, never the adapters times the whole batch: tile t of the grid finds its segment by a prefix sum
of the segments' tile counts (lora_start holds at most a few dozen entries: a vector in registers), so the
grid is cdiv(T, BLOCK_M) + L + 1 row tiles (each segment ends in at most one partial tile) and idle
adapters cost nothing. A grid of adapters x cdiv(T, BLOCK_M), as simple ports launch, is mostly programs
that exit at once: 33 x 64 x 112 x 2 of them for the 4096-token workload.

- shrink: h[s, p] = x[sorted_tokens[p]] @ lora_a[s, l]^T, in fp32, for the sorted position p of every
  adapter token, stored at p (so the expand reads it contiguously). The rank is a single tile; the skinny
  reduction over H is split across programs when the row tiles alone cannot fill the GPU, the partials
  added with fp32 atomics into a zeroed buffer.
- expand: y[t, slice] = base[t, slice] + scale[l] * bf16(h[s, p]) @ lora_b[s, l]^T, for token t at sorted
  position p, in fp32, rounded once; the no-adapter segment copies base. Every row of y is written by
  exactly one segment, so y needs no initialisation. h is rounded to bf16 for the tensor cores, as
  Punica does (the task allows it).
"""

import torch
import triton
import triton.language as tl

MIN_BLOCK_M = 16  # the smallest row tile of a bf16 MMA
MAX_BLOCK_M = 64
MIN_RANK_BLOCK = 16  # the MMA's smallest K (expand) and N (shrink); smaller ranks are masked
SHRINK_BLOCK_K = 128
EXPAND_BLOCK_N = 128
MIN_PROGRAMS = 264  # two per SM on an H100 / H200: split the shrink's H until the grid has as many


@triton.jit
def _find_tile(start_ptr, n_adapters, T, t, BLOCK_M: tl.constexpr, SEGMENTS: tl.constexpr):
    """Segment (adapter slot, or n_adapters for the tokens with none) of row tile t, its first sorted
    position and length, and the tile's offset in it; a segment past n_adapters when t is past the end."""
    idx = tl.arange(0, SEGMENTS)
    begin = tl.load(start_ptr + idx, mask=idx <= n_adapters, other=T)
    end = tl.load(start_ptr + idx + 1, mask=idx < n_adapters, other=T)
    tiles = (end - begin + BLOCK_M - 1) // BLOCK_M
    last = tl.cumsum(tiles, 0)  # one past each segment's last tile
    seg = tl.sum((last <= t).to(tl.int32), 0)
    here = idx == seg
    first_tile = tl.sum(tl.where(here, last - tiles, 0), 0)
    seg_begin = tl.sum(tl.where(here, begin, 0), 0)
    seg_len = tl.sum(tl.where(here, end - begin, 0), 0)
    return seg, seg_begin, seg_len, (t - first_tile) * BLOCK_M


@triton.jit
def _shrink_kernel(
    x_ptr, a_ptr, h_ptr, sorted_ptr, start_ptr,
    T, H, R, n_adapters, k_per_split,
    stride_xt, stride_as, stride_al, stride_ar, stride_hs, stride_hp,
    BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, SEGMENTS: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    tile = tl.program_id(0) // SPLIT_K
    split = tl.program_id(0) % SPLIT_K
    s = tl.program_id(1)
    lora, seg_begin, seg_len, m0 = _find_tile(start_ptr, n_adapters, T, tile, BLOCK_M, SEGMENTS)
    if lora >= n_adapters:  # the tokens with no adapter, or past the last tile
        return
    offs_m = m0 + tl.arange(0, BLOCK_M)
    m_ok = offs_m < seg_len
    tokens = tl.load(sorted_ptr + seg_begin + offs_m, mask=m_ok, other=0).to(tl.int64)
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < R
    a_base = a_ptr + s * stride_as + lora.to(tl.int64) * stride_al
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    k_begin = split * k_per_split
    k_end = tl.minimum(k_begin + k_per_split, H)
    for k in range(k_begin, k_end, BLOCK_K):
        ks = k + tl.arange(0, BLOCK_K)
        k_ok = ks < k_end
        x = tl.load(x_ptr + tokens[:, None] * stride_xt + ks[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        a = tl.load(a_base + offs_r[None, :] * stride_ar + ks[:, None], mask=k_ok[:, None] & r_ok[None, :], other=0.0)
        acc = tl.dot(x, a, acc)
    h_ptrs = h_ptr + s * stride_hs + (seg_begin + offs_m).to(tl.int64)[:, None] * stride_hp + offs_r[None, :]
    mask = m_ok[:, None] & r_ok[None, :]
    if SPLIT_K == 1:
        tl.store(h_ptrs, acc, mask=mask)
    else:
        tl.atomic_add(h_ptrs, acc, mask=mask)


@triton.jit
def _expand_kernel(
    h_ptr, b_ptr, base_ptr, y_ptr, scales_ptr, sorted_ptr, start_ptr,
    T, R, NS, n_adapters,
    stride_hs, stride_hp, stride_bs, stride_bl, stride_bn, stride_base, stride_y,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr, SEGMENTS: tl.constexpr,
):
    tiles_n = tl.cdiv(NS, BLOCK_N)
    tile = tl.program_id(0) // tiles_n
    pid_n = tl.program_id(0) % tiles_n
    s = tl.program_id(1)
    lora, seg_begin, seg_len, m0 = _find_tile(start_ptr, n_adapters, T, tile, BLOCK_M, SEGMENTS)
    if lora > n_adapters:  # past the last tile
        return
    offs_m = m0 + tl.arange(0, BLOCK_M)
    m_ok = offs_m < seg_len
    tokens = tl.load(sorted_ptr + seg_begin + offs_m, mask=m_ok, other=0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < NS
    cols = s * NS + offs_n
    mask = m_ok[:, None] & n_ok[None, :]
    out = tl.load(base_ptr + tokens[:, None] * stride_base + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if lora < n_adapters:
        offs_r = tl.arange(0, BLOCK_R)
        r_ok = offs_r < R
        h = tl.load(h_ptr + s * stride_hs + (seg_begin + offs_m).to(tl.int64)[:, None] * stride_hp + offs_r[None, :],
                    mask=m_ok[:, None] & r_ok[None, :], other=0.0)
        b = tl.load(b_ptr + s * stride_bs + lora.to(tl.int64) * stride_bl + offs_n[None, :] * stride_bn + offs_r[:, None],
                    mask=r_ok[:, None] & n_ok[None, :], other=0.0)
        out += tl.dot(h.to(b_ptr.dtype.element_ty), b) * tl.load(scales_ptr + lora)
    tl.store(y_ptr + tokens[:, None] * stride_y + cols[None, :], out.to(y_ptr.dtype.element_ty), mask=mask)


def launch_config(T, L, R, H, S):
    """Row tile from the mean tokens per adapter, rank tile, and the shrink's split of H (module docstring)."""
    block_m = min(MAX_BLOCK_M, max(MIN_BLOCK_M, triton.next_power_of_2(triton.cdiv(T, L))))
    row_tiles = triton.cdiv(T, block_m) + L + 1
    split = max(1, min(triton.cdiv(H, SHRINK_BLOCK_K), triton.cdiv(MIN_PROGRAMS, row_tiles * S)))
    k_per_split = triton.cdiv(triton.cdiv(H, split), SHRINK_BLOCK_K) * SHRINK_BLOCK_K
    return {"BLOCK_M": block_m, "BLOCK_R": max(MIN_RANK_BLOCK, triton.next_power_of_2(R)), "row_tiles": row_tiles,
            "SPLIT_K": triton.cdiv(H, k_per_split), "k_per_split": k_per_split,
            "SEGMENTS": triton.next_power_of_2(L + 1)}


def forward(x, base, lora_a, lora_b, scales, token_lora, sorted_tokens, lora_start):
    T, H = x.shape
    S, L, R = lora_a.shape[:3]
    NS = lora_b.shape[2]
    assert x.stride(1) == 1 and base.stride(1) == 1 and lora_a.stride(3) == 1 and lora_b.stride(3) == 1
    cfg = launch_config(T, L, R, H, S)
    # Zeroed: the split shrink adds its partials into it.
    h = torch.zeros((S, T, R), dtype=torch.float32, device=x.device)
    _shrink_kernel[(cfg["row_tiles"] * cfg["SPLIT_K"], S)](
        x, lora_a, h, sorted_tokens, lora_start,
        T, H, R, L, cfg["k_per_split"],
        x.stride(0), lora_a.stride(0), lora_a.stride(1), lora_a.stride(2), h.stride(0), h.stride(1),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_R=cfg["BLOCK_R"], BLOCK_K=SHRINK_BLOCK_K, SEGMENTS=cfg["SEGMENTS"],
        SPLIT_K=cfg["SPLIT_K"], num_warps=4,
    )
    y = torch.empty_like(base)
    _expand_kernel[(cfg["row_tiles"] * triton.cdiv(NS, EXPAND_BLOCK_N), S)](
        h, lora_b, base, y, scales, sorted_tokens, lora_start,
        T, R, NS, L,
        h.stride(0), h.stride(1), lora_b.stride(0), lora_b.stride(1), lora_b.stride(2), base.stride(0), y.stride(0),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=EXPAND_BLOCK_N, BLOCK_R=cfg["BLOCK_R"], SEGMENTS=cfg["SEGMENTS"],
        num_warps=4,
    )
    return y
