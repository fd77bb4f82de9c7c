"""Fused residual add + RMSNorm: expert Triton reference.

HBM traffic is the 8*M*N-byte floor: x and residual are read from HBM once, y and the new
residual written once. Two row kernels, chosen by shape (measured on an H200, see
benchmarks/NOTES.md):

- one pass with the whole row in fp32 registers: best for widths that are not a multiple of
  the chunk (7168) and for launch-bound batches, where one short kernel is all there is;
- two passes over chunks of the row: the first computes the sum of squares and leaves the chunks
  in L2 (evict_last), the second re-reads them from L2 to write both outputs. Each iteration keeps
  fewer registers live than a whole row, so more warps stay resident and more loads are in flight;
  this reaches ~98% of copy bandwidth on wide, tall inputs where the one-pass kernel stops near 95%.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6

# Launch heuristic (H200 measurements, benchmarks/NOTES.md). Module-level so sweeps can override it.
CHUNK = 4096             # two-pass chunk width; used when N is a multiple of it and M is large
TWO_PASS_MIN_ROWS = 1024  # below this, one short kernel beats the extra pass over L2
TWO_PASS_WARPS = 16
ONE_PASS_WARPS = 8
MAX_BLOCK_N = 65536      # a one-pass row beyond this no longer fits in registers


@triton.jit
def _rmsnorm_one_pass(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, BLOCK_N: tl.constexpr):
    # int64 row offset: row * N overflows int32 once M*N exceeds 2^31.
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK_N)
    # BLOCK_N is N rounded up to a power of two (7168 -> 8192); masked lanes load 0 and add
    # nothing to the sum of squares, which is divided by the true N.
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # Statistics and y use the unrounded fp32 sum; each output is rounded exactly once.
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(res_out_ptr + row + cols, r.to(res_out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_two_pass(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, M, N, eps,
                      BLOCK_M: tl.constexpr, CHUNK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = (rows < M)[:, None]
    # The masks are redundant when CHUNK divides N, but this masked [BLOCK_M, CHUNK] form measured
    # ~6% faster on an H200 than the same loops unmasked in 1-D (benchmarks/NOTES.md).
    # Pass 1: sum of squares. evict_last keeps the row's chunks in L2 for pass 2.
    acc = tl.zeros([BLOCK_M, CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = row_mask & (cols < N)[None, :]
        offs = rows[:, None] * N + cols[None, :]
        r = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32) + \
            tl.load(res_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        acc += r * r
    rstd = tl.rsqrt(tl.sum(acc, axis=1) / N + eps)[:, None]
    # Pass 2: the same chunks again, now L2 hits, evicted first since nothing reads them later.
    for start in tl.range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = row_mask & (cols < N)[None, :]
        offs = rows[:, None] * N + cols[None, :]
        r = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32) + \
            tl.load(res_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + offs, (r * rstd * w[None, :]).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(res_out_ptr + offs, r.to(res_out_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    assert residual.shape == (M, N) and weight.shape == (N,)
    assert x.is_contiguous() and residual.is_contiguous() and weight.is_contiguous()
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    if N % CHUNK == 0 and M >= TWO_PASS_MIN_ROWS:
        _rmsnorm_two_pass[(M,)](x, residual, weight, y, residual_out, M, N, EPS, BLOCK_M=1, CHUNK=CHUNK,
                                num_warps=TWO_PASS_WARPS)
    else:
        block_n = triton.next_power_of_2(N)
        assert block_n <= MAX_BLOCK_N, f"N={N} is too wide for a register-resident row"
        _rmsnorm_one_pass[(M,)](x, residual, weight, y, residual_out, N, EPS, BLOCK_N=block_n,
                                num_warps=ONE_PASS_WARPS)
    return y, residual_out
