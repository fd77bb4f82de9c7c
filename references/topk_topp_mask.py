"""Top-k then top-p masking of logits without a sort: expert Triton reference.

One program owns one row and finds its two thresholds by searching the space of fp32 values, not
by ordering the row. Logits are mapped to int keys that order like the floats (-0.0 folded into
+0.0 so that equal floats share a key), and each search keeps an interval [lo, hi) of keys with the
invariant "the statistic at lo reaches the target, at hi it does not". One pass over the row
evaluates the statistic at NUM_PIVOTS evenly spaced keys at once (a [BLOCK, NUM_PIVOTS] compare
against each loaded tile) and shrinks the interval NUM_PIVOTS + 1 fold, so 32-bit keys are settled
in eight passes, with exact ties by construction: the answer is a key that some logit has.

- top-k: the statistic is the count of logits with key >= pivot, the target k. Counts are exact in
  fp32 below 2**24, far above any vocabulary.
- top-p: the statistic is the unnormalised softmax mass exp(x - max) of the top-k survivors with
  key >= pivot, the target p times their total mass (one extra pass). Searching from the top-k
  threshold upward keeps the two cuts nested.
A row whose k covers the vocabulary, or whose p is 1, skips that search (a branch inside the kernel:
the launch never depends on the values). The last pass writes each logit or -inf.

Every pass streams the row (at most 608 KB at V = 151936) from L2 after the first: the programs in
flight at once hold about 80 MB of rows on 132 SMs, so later passes partly fall back to HBM. A row
per program gives 64-256 programs on the large workloads; the B = 8 workload is latency-bound.
"""

import torch
import triton
import triton.language as tl

# Launch constants, read at every call so that a tuning sweep can override them.
BLOCK = 2048        # logits per tile: 8 KB in flight per program, four fp32 (one 16-byte load) per thread
NUM_PIVOTS = 16     # keys tested per pass: 17-fold narrowing, about 3 ops per pivot and logit, which keeps
                    # a pass near the balance of H100's fp32 issue rate and its bandwidth (~80 ops per fp32 read)
NUM_WARPS = 16      # the [BLOCK, NUM_PIVOTS] compare tile is 64 values per thread: no spills


@triton.jit
def _ordered_key(x):
    # fp32 bits as int32, negatives' magnitude bits flipped so that int order is float order.
    # Adding +0.0 turns -0.0 into +0.0: equal floats must share a key, or a tie could be split.
    bits = (x + 0.0).to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def _statistic_above(row_ptr, V, lo, step, hi, floor_key, row_max,
                     MASS: tl.constexpr, BLOCK: tl.constexpr, NUM_PIVOTS: tl.constexpr):
    """At each pivot min(lo + (j + 1) * step, hi): the count (MASS false) or the exp(x - row_max) mass of the
    logits with key >= floor_key (MASS true) of the row's logits with key >= pivot."""
    # Interval ends are int64 (a step can reach 2**32 / 17); pivots past hi are clamped, so that every
    # compare runs on int32 keys (half the registers of int64).
    pivots = tl.minimum(lo + (tl.arange(0, NUM_PIVOTS) + 1).to(tl.int64) * step, hi).to(tl.int32)
    acc = tl.zeros([NUM_PIVOTS], dtype=tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        valid = offs < V
        x = tl.load(row_ptr + offs, mask=valid, other=float("-inf"))
        key = _ordered_key(x)
        if MASS:
            weight = tl.where(valid & (key >= floor_key), tl.exp(x - row_max), 0.0)
        else:
            weight = tl.where(valid, 1.0, 0.0)
        hit = key[:, None] >= pivots[None, :]
        acc += tl.sum(tl.where(hit, weight[:, None], 0.0), axis=0)
    return acc


@triton.jit
def _search(row_ptr, V, lo, hi, target, floor_key, row_max,
            MASS: tl.constexpr, BLOCK: tl.constexpr, NUM_PIVOTS: tl.constexpr):
    """The largest key in [lo, hi) at which the statistic still reaches ``target`` (it does at lo)."""
    while hi - lo > 1:
        step = (hi - lo + NUM_PIVOTS) // (NUM_PIVOTS + 1)
        acc = _statistic_above(row_ptr, V, lo, step, hi, floor_key, row_max, MASS, BLOCK, NUM_PIVOTS)
        # The statistic falls as the pivot rises: the pivots reaching the target are a prefix.
        reached = tl.sum((acc >= target).to(tl.int64), axis=0)
        hi = tl.minimum(hi, lo + (reached + 1) * step)
        lo = lo + reached * step
    return lo


@triton.jit
def _topk_topp_kernel(logits_ptr, k_ptr, p_ptr, out_ptr, V, stride_row, stride_out,
                      BLOCK: tl.constexpr, NUM_PIVOTS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * stride_row
    k = tl.load(k_ptr + row).to(tl.int64)
    p = tl.load(p_ptr + row)

    # Pass 1: the row maximum, the upper end of both searches and the softmax shift.
    row_max = tl.full([], float("-inf"), tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    neg_inf_key = _ordered_key(tl.full([], float("-inf"), tl.float32)).to(tl.int64)
    top = _ordered_key(row_max).to(tl.int64) + 1
    # An all -inf row keeps everything (all -inf); a finite shift keeps exp() free of NaN.
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)

    # Top-k: every logit (V of them) is at or above the key of -inf, so the search starts valid.
    cut = neg_inf_key
    if k < V:
        cut = _search(row_ptr, V, neg_inf_key, top, k.to(tl.float32), neg_inf_key, shift, False, BLOCK, NUM_PIVOTS)

    # Top-p over the top-k survivors: their total mass, then the highest cut still holding p of it.
    if p < 1.0:
        # Every pivot at the cut itself (a step of 0): each lane holds the survivors' whole mass.
        total = tl.max(_statistic_above(row_ptr, V, cut, 0, top, cut, shift, True, BLOCK, NUM_PIVOTS), axis=0)
        cut = _search(row_ptr, V, cut, top, p * total, cut, shift, True, BLOCK, NUM_PIVOTS)

    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        valid = offs < V
        x = tl.load(row_ptr + offs, mask=valid, other=float("-inf"))
        tl.store(out_ptr + row * stride_out + offs, tl.where(_ordered_key(x) >= cut, x, float("-inf")), mask=valid)


def forward(logits, k, p):
    B, V = logits.shape
    assert logits.stride(1) == 1, "the vocabulary dimension must be contiguous"
    out = torch.empty_like(logits)
    _topk_topp_kernel[(B,)](logits, k, p, out, V, logits.stride(0), out.stride(0),
                            BLOCK=BLOCK, NUM_PIVOTS=NUM_PIVOTS, num_warps=NUM_WARPS)
    return out
