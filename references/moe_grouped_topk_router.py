"""DeepSeek-V3 grouped top-k routing: expert Triton reference.

One pass per token does everything in registers: each program loads BLOCK_T rows of router logits
as a [BLOCK_T, groups, experts-per-group] tile (1 KB per row), applies the sigmoid and the bias,
scores each group by its two best biased experts, keeps the best groups, picks the top-k experts
among them, and writes only the k ids and their renormalised, scaled unbiased weights. Every
selection is k rounds of "max, then the lowest index holding it, then mask it out", so ties are
broken toward the lower index and the same candidate is never taken twice.
"""

import torch
import triton
import triton.language as tl

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING_FACTOR = 2.5

# Decode batches (up to SMALL_T tokens) get one token per program: the launch is latency-bound, and
# one row per program spreads the few rows over as many SMs as possible. Larger batches put four
# rows in a program: 4 KB of logits per program, about 8 registers per thread per [4, 8, 32] tile
# at 4 warps, so several programs stay resident per SM to hide the load latency.
SMALL_T = 1024
ROWS_LARGE = 4


@triton.jit
def _grouped_topk_kernel(
    logits_ptr, bias_ptr, weights_ptr, ids_ptr,
    T, stride_lt, scaling,
    N_GROUP: tl.constexpr, PER_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    row_ok = rows < T
    g = tl.arange(0, N_GROUP)
    e = tl.arange(0, PER_GROUP)
    # The flat expert index of every element of the [BLOCK_T, N_GROUP, PER_GROUP] tile.
    expert = g[None, :, None] * PER_GROUP + e[None, None, :]
    offs = rows.to(tl.int64)[:, None, None] * stride_lt + expert
    logits = tl.load(logits_ptr + offs, mask=row_ok[:, None, None], other=0.0)
    scores = tl.sigmoid(logits)
    biased = scores + tl.load(bias_ptr + expert)
    n_experts: tl.constexpr = N_GROUP * PER_GROUP

    # Group score: the sum of the group's two best biased scores. The second best is the max once
    # the first best's lowest-index position is masked, so a tied pair counts twice, as topk does.
    best = tl.max(biased, axis=2)
    first = tl.min(tl.where(biased == best[:, :, None], e[None, None, :], PER_GROUP), axis=2)
    second = tl.max(tl.where(e[None, None, :] == first[:, :, None], float("-inf"), biased), axis=2)
    group_score = best + second

    # Keep TOPK_GROUP groups: rounds of argmax (lowest index on ties), each taken group masked out.
    kept = tl.zeros((BLOCK_T, N_GROUP), dtype=tl.int1)
    for _ in tl.static_range(TOPK_GROUP):
        top = tl.max(group_score, axis=1)
        pick = tl.min(tl.where(group_score == top[:, None], g[None, :], N_GROUP), axis=1)
        chosen = g[None, :] == pick[:, None]
        kept = kept | chosen
        group_score = tl.where(chosen, float("-inf"), group_score)
    candidates = tl.where(kept[:, :, None], biased, float("-inf"))

    # Top-k experts of the kept groups, and the unbiased score of each as its weight.
    k = tl.arange(0, TOP_K)
    ids = tl.zeros((BLOCK_T, TOP_K), dtype=tl.int32)
    weights = tl.zeros((BLOCK_T, TOP_K), dtype=tl.float32)
    for r in tl.static_range(TOP_K):
        top = tl.max(tl.max(candidates, axis=2), axis=1)
        at_top = candidates == top[:, None, None]
        pick = tl.min(tl.min(tl.where(at_top, expert, n_experts), axis=2), axis=1)
        chosen = expert == pick[:, None, None]
        w = tl.sum(tl.sum(tl.where(chosen, scores, 0.0), axis=2), axis=1)
        ids = tl.where(k[None, :] == r, pick[:, None], ids)
        weights = tl.where(k[None, :] == r, w[:, None], weights)
        candidates = tl.where(chosen, float("-inf"), candidates)

    weights = weights / tl.sum(weights, axis=1)[:, None] * scaling
    out = rows.to(tl.int64)[:, None] * TOP_K + k[None, :]
    tl.store(weights_ptr + out, weights, mask=row_ok[:, None])
    tl.store(ids_ptr + out, ids, mask=row_ok[:, None])


def forward(gating_output, e_score_correction_bias):
    T, E = gating_output.shape
    assert E % N_GROUP == 0 and gating_output.stride(1) == 1 and e_score_correction_bias.is_contiguous()
    weights = torch.empty((T, TOP_K), dtype=torch.float32, device=gating_output.device)
    ids = torch.empty((T, TOP_K), dtype=torch.int32, device=gating_output.device)
    block_t = 1 if T <= SMALL_T else ROWS_LARGE
    _grouped_topk_kernel[(triton.cdiv(T, block_t),)](
        gating_output, e_score_correction_bias, weights, ids,
        T, gating_output.stride(0), ROUTED_SCALING_FACTOR,
        N_GROUP=N_GROUP, PER_GROUP=E // N_GROUP, TOPK_GROUP=TOPK_GROUP, TOP_K=TOP_K,
        BLOCK_T=block_t, num_warps=1 if block_t == 1 else 4,
    )
    return weights, ids
