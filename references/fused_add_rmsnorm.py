"""Fused residual add + RMSNorm: expert Triton reference.

HBM traffic is the 8*M*N-byte floor: x and residual are read from HBM once, y and the new
residual written once. One program per row, two passes over chunks of the row: the first
computes the sum of squares and leaves the chunks in L2 (evict_last); the second re-reads them
from L2 to write both outputs. Each iteration keeps only a chunk live in registers, not a whole
row, so many warps fit and many loads are in flight. The row width is a compile-time constant
(workloads have fixed widths): loop trip counts, masks and offsets fold, as in inductor's kernel.
On an H200 this form matched or beat torch.compile on every workload, where a one-pass kernel
with the whole row in registers lost 2-5% (benchmarks/NOTES.md).
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6

# Launch heuristic (H200 measurements, benchmarks/NOTES.md). Module-level so sweeps can override it.
CHUNK = 4096       # widest chunk per iteration; narrower rows take one chunk of next_power_of_2(N)
ELEMS_PER_WARP = 256  # warps = chunk / this, capped: 16 warps for a 4096-wide chunk
MAX_WARPS = 16


@triton.jit
def _rmsnorm_two_pass(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, eps, N: tl.constexpr, CHUNK: tl.constexpr):
    # int64 row offset: row * N overflows int32 once M*N exceeds 2^31.
    row = tl.program_id(0).to(tl.int64) * N
    # Pass 1: sum of squares in an fp32 vector, reduced once at the end. Masked lanes of a last
    # partial chunk load 0 and add nothing; the mean divides by the true N.
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32) + \
            tl.load(res_ptr + row + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += r * r
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    # Pass 2: the same chunks again, now L2 hits, evicted first since nothing reads them later.
    # Statistics and y use the unrounded fp32 sum; each output is rounded exactly once.
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32) + \
            tl.load(res_ptr + row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(res_out_ptr + row + cols, r.to(res_out_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    assert residual.shape == (M, N) and weight.shape == (N,)
    assert x.is_contiguous() and residual.is_contiguous() and weight.is_contiguous()
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    chunk = min(CHUNK, triton.next_power_of_2(N))
    num_warps = max(1, min(MAX_WARPS, chunk // ELEMS_PER_WARP))
    _rmsnorm_two_pass[(M,)](x, residual, weight, y, residual_out, EPS, N=N, CHUNK=chunk, num_warps=num_warps)
    return y, residual_out
