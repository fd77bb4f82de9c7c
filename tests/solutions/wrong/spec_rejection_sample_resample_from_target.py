"""Wrong: a rejected position is resampled from the target distribution (the race over p_target / q)
instead of the residual max(p_target - p_draft, 0): the output is then biased towards the draft."""


import torch
import triton
import triton.language as tl

PLACEHOLDER = tl.constexpr(-1)
# Launch constants, read at every call so that a tuning sweep can override them.
BLOCK_V = 2048          # vocabulary entries per tile: one 16-byte load per thread per row at 4 warps
TARGET_PROGRAMS = 528   # four per SM on a 132-SM H100/H200: enough loads in flight to stream HBM
MIN_SLICE = 8192        # each split scans at least this much vocabulary, or its fixed walk dominates


@triton.jit
def _first_rejection(draft_ids_ptr, cu_ptr, draft_probs_ptr, target_probs_ptr, uniform_ptr, req, V):
    """(start, n, r): the request's first draft row, its draft count, and its first rejected
    position (n when every draft is accepted)."""
    end = tl.load(cu_ptr + req).to(tl.int64)
    start = tl.where(req > 0, tl.load(cu_ptr + req - 1, mask=req > 0, other=0).to(tl.int64), 0)
    n = end - start
    r = n
    # A runtime loop to the request's own count: no recompile per draft length.
    for i in range(0, n):
        live = r == n
        pos = start + i
        d = tl.load(draft_ids_ptr + pos).to(tl.int64)
        p_draft = tl.load(draft_probs_ptr + pos * V + d, mask=live, other=1.0)
        p_target = tl.load(target_probs_ptr + pos * V + d, mask=live, other=1.0)
        u = tl.load(uniform_ptr + pos, mask=live, other=0.0)
        # Division, then the comparison in the uniform's float64, as vLLM decides it.
        accept = (p_draft > 0) & ((p_target / p_draft).to(tl.float64) >= u)
        r = tl.where(live & ~accept, i, r)
    return start, n, r


@triton.jit
def _race_kernel(draft_ids_ptr, cu_ptr, draft_probs_ptr, target_probs_ptr, uniform_ptr, q_ptr,
                 best_score_ptr, best_index_ptr, V, SPLITS, slice_len, BLOCK_V: tl.constexpr):
    req = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start, n, r = _first_rejection(draft_ids_ptr, cu_ptr, draft_probs_ptr, target_probs_ptr, uniform_ptr, req, V)
    best = tl.full([], -1.0, tl.float32)
    best_i = tl.full([], 0, tl.int64)
    if r < n:
        row = (start + r) * V
        lo = split.to(tl.int64) * slice_len
        for off in range(0, slice_len, BLOCK_V):
            cols = lo + off + tl.arange(0, BLOCK_V)
            valid = (cols < V) & (cols < lo + slice_len)
            p_t = tl.load(target_probs_ptr + row + cols, mask=valid, other=0.0, eviction_policy="evict_first")
            p_d = tl.load(draft_probs_ptr + row + cols, mask=valid, other=0.0, eviction_policy="evict_first")
            q = tl.load(q_ptr + req * V + cols, mask=valid, other=1.0, eviction_policy="evict_first")
            score = tl.where(valid, p_t / q, -1.0)
            tile_best = tl.max(score, axis=0)
            # Smallest index among the tile's best, and a strict > across tiles: the first maximum wins.
            tile_i = tl.min(tl.where(score == tile_best, cols, V), axis=0)
            take = tile_best > best
            best_i = tl.where(take, tile_i, best_i)
            best = tl.where(take, tile_best, best)
    tl.store(best_score_ptr + req * SPLITS + split, best)
    tl.store(best_index_ptr + req * SPLITS + split, best_i)


@triton.jit
def _write_kernel(draft_ids_ptr, cu_ptr, draft_probs_ptr, target_probs_ptr, uniform_ptr, bonus_ptr,
                  best_score_ptr, best_index_ptr, out_ptr, V, SPLITS, out_width,
                  BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr):
    req = tl.program_id(0).to(tl.int64)
    start, n, r = _first_rejection(draft_ids_ptr, cu_ptr, draft_probs_ptr, target_probs_ptr, uniform_ptr, req, V)
    s = tl.arange(0, BLOCK_S)
    scores = tl.load(best_score_ptr + req * SPLITS + s, mask=s < SPLITS, other=-2.0)
    indices = tl.load(best_index_ptr + req * SPLITS + s, mask=s < SPLITS, other=V)
    top = tl.max(scores, axis=0)
    recovered = tl.min(tl.where(scores == top, indices, V), axis=0)   # splits are in index order
    tail = tl.where(r < n, recovered, tl.load(bonus_ptr + req).to(tl.int64))
    k = tl.arange(0, BLOCK_K)
    drafts = tl.load(draft_ids_ptr + start + k, mask=k < r, other=PLACEHOLDER).to(tl.int64)
    tokens = tl.where(k < r, drafts, tl.where(k == r, tail, PLACEHOLDER))
    tl.store(out_ptr + req * out_width + k, tokens.to(out_ptr.dtype.element_ty), mask=k < out_width)


def forward(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, bonus_token_ids, uniform_probs, q,
            max_spec_len):
    B = cu_num_draft_tokens.numel()
    V = target_probs.shape[1]
    assert draft_probs.is_contiguous() and target_probs.is_contiguous() and q.is_contiguous()
    splits = max(1, min(triton.cdiv(TARGET_PROGRAMS, B), triton.cdiv(V, MIN_SLICE)))
    slice_len = triton.cdiv(triton.cdiv(V, splits), BLOCK_V) * BLOCK_V
    splits = triton.cdiv(V, slice_len)
    best_score = torch.empty((B, splits), dtype=torch.float32, device=q.device)
    best_index = torch.empty((B, splits), dtype=torch.int64, device=q.device)
    out = torch.empty((B, max_spec_len + 1), dtype=torch.int32, device=q.device)
    _race_kernel[(B, splits)](draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, uniform_probs, q,
                              best_score, best_index, V, splits, slice_len, BLOCK_V=BLOCK_V, num_warps=4)
    _write_kernel[(B,)](draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, uniform_probs,
                        bonus_token_ids, best_score, best_index, out, V, splits, max_spec_len + 1,
                        BLOCK_S=triton.next_power_of_2(splits),
                        BLOCK_K=triton.next_power_of_2(max_spec_len + 1), num_warps=1)
    return out
