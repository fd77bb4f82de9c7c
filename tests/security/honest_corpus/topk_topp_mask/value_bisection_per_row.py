"""Task: topk_topp_mask
Backend: interpreter
Expect: paid
Policy: accepts
Seed: 1322759976
Round: honest corpus

Idiom: a port in the style of vLLM's Triton top-k/top-p sampler (vllm/v1/sample/ops/topk_topp_triton.py): one program per row bisecting on logit values, written from its approach, adapted to the task's signature."""

import torch
import triton
import triton.language as tl


@triton.jit
def _count_ge(row_ptr, V, pivot, BLOCK_SIZE: tl.constexpr):
    n = 0.0
    for start in range(0, V, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        n += tl.sum(tl.where(x >= pivot, 1.0, 0.0), axis=0)
    return n


@triton.jit
def _mass_ge(row_ptr, V, pivot, floor, row_max, BLOCK_SIZE: tl.constexpr):
    s = 0.0
    for start in range(0, V, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        s += tl.sum(tl.where((x >= pivot) & (x >= floor), tl.exp(x - row_max), 0.0), axis=0)
    return s


@triton.jit
def _min_ge(row_ptr, V, bound, BLOCK_SIZE: tl.constexpr):
    # The smallest logit at or above bound: snaps a bisection bound onto the logit it brackets.
    m = float("inf")
    for start in range(0, V, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        m = tl.minimum(m, tl.min(tl.where(x >= bound, x, float("inf")), axis=0))
    return m


@triton.jit
def top_k_top_p_kernel(LOGITS, K, P, OUT, V, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = LOGITS + row * stride
    k = tl.load(K + row).to(tl.float32)
    p = tl.load(P + row)

    max_val = float("-inf")
    min_val = float("inf")
    n_finite = 0.0
    for start in range(0, V, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        finite = x > float("-inf")
        max_val = tl.maximum(max_val, tl.max(x, axis=0))
        min_val = tl.minimum(min_val, tl.min(tl.where(finite, x, float("inf")), axis=0))
        n_finite += tl.sum(tl.where(finite, 1.0, 0.0), axis=0)

    # Top-k pivot: the largest value with at least k logits at or above it. Bisect until the bounds
    # are neighbouring floats, then snap to the logit there (ties with it stay in).
    k_pivot = float("-inf")
    if n_finite > k:
        lo = min_val
        hi = max_val
        if _count_ge(row_ptr, V, hi, BLOCK_SIZE) >= k:
            lo = hi
        mid = lo + (hi - lo) * 0.5
        while (mid > lo) & (mid < hi):
            if _count_ge(row_ptr, V, mid, BLOCK_SIZE) >= k:
                lo = mid
            else:
                hi = mid
            mid = lo + (hi - lo) * 0.5
        k_pivot = _min_ge(row_ptr, V, lo, BLOCK_SIZE)

    # Top-p pivot over the top-k survivors, the same way on their probability mass.
    pivot = k_pivot
    if (p < 1.0) & (max_val > float("-inf")):
        total = _mass_ge(row_ptr, V, k_pivot, k_pivot, max_val, BLOCK_SIZE)
        target = p * total
        lo = tl.maximum(k_pivot, min_val)
        hi = max_val
        if _mass_ge(row_ptr, V, hi, k_pivot, max_val, BLOCK_SIZE) >= target:
            lo = hi
        mid = lo + (hi - lo) * 0.5
        while (mid > lo) & (mid < hi):
            if _mass_ge(row_ptr, V, mid, k_pivot, max_val, BLOCK_SIZE) >= target:
                lo = mid
            else:
                hi = mid
            mid = lo + (hi - lo) * 0.5
        pivot = _min_ge(row_ptr, V, lo, BLOCK_SIZE)

    for start in range(0, V, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + offs, mask=offs < V, other=float("-inf"))
        tl.store(OUT + row * stride + offs, tl.where(x >= pivot, x, float("-inf")), mask=offs < V)


def forward(logits, k, p):
    batch_size, vocab_size = logits.shape
    out = torch.empty_like(logits)
    top_k_top_p_kernel[(batch_size,)](logits, k, p, out, vocab_size, logits.stride(0), BLOCK_SIZE=4096, num_warps=8)
    return out
