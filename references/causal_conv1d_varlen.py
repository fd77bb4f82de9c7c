"""Varlen causal depthwise conv1d + SiLU with a conv-state cache: expert Triton reference.

Each program owns a (token chunk, channel block) tile of one sequence. The tile's width-1 shifted
windows are loaded straight from x (token-major, so each row of the tile is a contiguous run of
channels: 16-byte vectors); the rows before the sequence's first token come from its cached state
(or zeros), so the history and the bias, the four multiply-adds and the SiLU happen in registers
and every output element is written once. The program holding a sequence's last token also writes
the sequence's new state. Untouched slots of the cache reach the new-state tensor through one flat
copy launched first (vLLM updates its cache in place, so there this copy does not exist).

Varlen: an upper bound of chunks (T // tile height + B) is launched; each program finds its sequence
and chunk from query_start_loc in the kernel, so the launch depends only on shapes.
"""

import torch
import triton
import triton.language as tl

MAX_BLOCK_T = 64    # tokens per tile at most: the 3-row halo re-read from L1 is then under 5% of the tile
TILE_ELEMS = 8192   # elements per tile (16 KB of bf16 in, 16 KB out): 64 per thread at 4 warps
MIN_BLOCK_C = 128   # channels per tile at least: 256 contiguous bytes per bf16 row
MAX_BLOCK_C = 2048
COPY_BLOCK = 4096


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _conv_kernel(x_ptr, w_ptr, bias_ptr, state_ptr, loc_ptr, cache_ptr, init_ptr, out_ptr, new_state_ptr,
                 dim, B, W: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    chunk = tl.program_id(0)
    # Which sequence and chunk: chunk counts per sequence, their running sum, the one holding this id.
    s = tl.arange(0, BLOCK_S)
    lo = tl.load(loc_ptr + s, mask=s < B, other=0)
    hi = tl.load(loc_ptr + s + 1, mask=s < B, other=0)
    count = (hi - lo + BLOCK_T - 1) // BLOCK_T
    upto = tl.cumsum(count, 0)
    mine = (upto - count <= chunk) & (chunk < upto)
    if tl.sum(mine.to(tl.int32), axis=0) > 0:
        seq = tl.sum(tl.where(mine, s, 0), axis=0)
        start = tl.sum(tl.where(mine, lo, 0), axis=0).to(tl.int64)
        end = tl.sum(tl.where(mine, hi, 0), axis=0).to(tl.int64)
        t0 = start + (chunk - tl.sum(tl.where(mine, upto - count, 0), axis=0)).to(tl.int64) * BLOCK_T
        slot = tl.load(cache_ptr + seq).to(tl.int64)
        init = tl.load(init_ptr + seq) != 0
        c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        c_ok = c < dim
        t = t0 + tl.arange(0, BLOCK_T)
        t_ok = t < end
        tile_ok = t_ok[:, None] & c_ok[None, :]
        if slot < 0:  # a padding sequence: zeros, its slot (none) untouched
            tl.store(out_ptr + t[:, None] * dim + c[None, :], tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
                     .to(out_ptr.dtype.element_ty), mask=tile_ok)
        else:
            state_row = state_ptr + (slot * dim + c) * (W - 1)
            acc = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32) + \
                tl.load(bias_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[None, :]
            for w in tl.static_range(W):
                src = t - (W - 1) + w
                in_seq = src >= start
                xv = tl.load(x_ptr + src[:, None] * dim + c[None, :], mask=tile_ok & in_seq[:, None], other=0.0)
                # Before the sequence: its history, state entry src - start + W - 1 (oldest first).
                hist = (~in_seq & t_ok & init)[:, None] & c_ok[None, :]
                sv = tl.load(state_row[None, :] + (src - start + W - 1)[:, None], mask=hist, other=0.0)
                wv = tl.load(w_ptr + c * W + w, mask=c_ok, other=0.0).to(tl.float32)
                acc += wv[None, :] * (xv.to(tl.float32) + sv.to(tl.float32))
            y = acc / (1.0 + tl.exp(-acc))
            tl.store(out_ptr + t[:, None] * dim + c[None, :], y.to(out_ptr.dtype.element_ty), mask=tile_ok)
            if end - 1 < t0 + BLOCK_T:  # this tile holds the last token: the new state
                # (new names: Triton's GPU compiler refuses a variable whose shape an `if` changes)
                j = tl.arange(0, 4)
                last = end - (W - 1) + j
                j_ok = j < W - 1
                last_in_seq = last >= start
                last_x = tl.load(x_ptr + last[:, None] * dim + c[None, :],
                                 mask=(j_ok & last_in_seq)[:, None] & c_ok[None, :], other=0.0)
                last_s = tl.load(state_row[None, :] + (last - start + W - 1)[:, None],
                                 mask=(j_ok & ~last_in_seq & init)[:, None] & c_ok[None, :], other=0.0)
                tl.store(new_state_ptr + (slot * dim + c[None, :]) * (W - 1) + j[:, None], last_x + last_s,
                         mask=j_ok[:, None] & c_ok[None, :])


def forward(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state):
    T, dim = x.shape
    B = cache_indices.numel()
    W = weight.shape[1]
    assert W <= 5 and x.is_contiguous() and conv_states.is_contiguous() and weight.is_contiguous()
    out = torch.empty_like(x)
    new_states = torch.empty_like(conv_states)
    n = conv_states.numel()
    _copy_kernel[(triton.cdiv(n, COPY_BLOCK),)](conv_states, new_states, n, BLOCK=COPY_BLOCK, num_warps=4)
    # Decode batches (one token per sequence) get one-token tiles, not a 64-row tile with one row live:
    # the tile height follows the mean sequence length, a property of the shapes alone.
    block_t = min(MAX_BLOCK_T, triton.next_power_of_2(triton.cdiv(T, B)))
    # The channel block fills the tile budget: wide rows for one-token tiles keep each program's work
    # (and its 16-byte vectors) as large as a prefill tile's.
    block_c = max(MIN_BLOCK_C, min(MAX_BLOCK_C, TILE_ELEMS // block_t, triton.next_power_of_2(dim)))
    grid = (T // block_t + B, triton.cdiv(dim, block_c))
    _conv_kernel[grid](x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, out,
                       new_states, dim, B, W=W, BLOCK_S=triton.next_power_of_2(B + 1), BLOCK_T=block_t,
                       BLOCK_C=block_c, num_warps=4)
    return out, new_states
