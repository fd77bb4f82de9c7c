"""Muon's Newton-Schulz orthogonalisation: expert Triton reference.

Compute-bound: per iteration X X^T (2 p^2 q FLOPs), A A (2 p^3) and B X (2 p^2 q), for X [p, q],
p <= q. One batched GEMM kernel does all three, on the tensor cores with fp32 accumulation:

- X X^T and b A + c A A are symmetric: only the tiles on and below the diagonal are computed (the
  programs above it exit at once) and each off-diagonal tile is stored twice, at its place and
  transposed. That skips almost half of the first two GEMMs, 25-33% of all FLOPs.
- The linear combinations are GEMM epilogues: b A + c (A A) and a X + B X read the second term's
  tile and combine in fp32, so B and the new X are written once, never an unscaled product.
- Operands are addressed through strides: X^T is X read column-wise, and a tall input's transpose is
  a swapped pair of strides for the first read and the last write, never a copy.

The Frobenius normalisation is two small kernels before the loop (per-chunk sums of squares, then
the scale applied while writing X), 4 bytes per element in all, negligible against the GEMMs.
"""

import torch
import triton
import triton.language as tl

A_COEF, B_COEF, C_COEF = 3.4445, -4.7750, 2.0315
STEPS = 5
EPS = 1e-7

# sm_90 tiles: 128x128 output tiles with a K step of 64 fill a warpgroup MMA, 8 warps (two
# warpgroups) and 3 stages fit the 228 KB of shared memory per SM ((128+128)*64*2 bytes per stage),
# and grouping 8 row tiles keeps the B operand's columns in L2 across consecutive programs.
GPU_TILE = dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=3)
# The interpreter pays per element of every tile, masked or not, and per program: tiles no larger than
# the operands (16 at least, for tl.dot), long K steps.
CPU_TILE_MAX = (32, 1024, 1024)  # the largest BM, BN, BK
NORM_BLOCK = 4096   # elements per step of the sum-of-squares and scale kernels
NORM_STEPS = 4      # steps per program: 16 K elements per partial sum


@triton.jit
def _sumsq_partials(g_ptr, part_ptr, numel, chunks, BLOCK: tl.constexpr, STEPS_PER: tl.constexpr):
    mat = tl.program_id(1).to(tl.int64)
    chunk = tl.program_id(0)
    base = g_ptr + mat * numel
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.range(0, STEPS_PER):
        offs = (chunk * STEPS_PER + s) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(base + offs, mask=offs < numel, other=0.0).to(tl.float32)
        acc += v * v
    tl.store(part_ptr + mat * chunks + chunk, tl.sum(acc, axis=0))


@triton.jit
def _scale(g_ptr, part_ptr, x_ptr, rows, cols, s_gr, s_gc, numel, chunks, eps,
           BLOCK: tl.constexpr, PART_BLOCK: tl.constexpr):
    # X[r, c] = G(r, c) / (||G||_F + eps): G read through (s_gr, s_gc), so a tall matrix is read
    # transposed; X written contiguous [rows, cols]. Every program re-sums its matrix's partials (a
    # few KB from L2) rather than waiting on another kernel for one scalar.
    mat = tl.program_id(1).to(tl.int64)
    total = tl.zeros([PART_BLOCK], dtype=tl.float32)
    for start in tl.range(0, chunks, PART_BLOCK):
        p = start + tl.arange(0, PART_BLOCK)
        total += tl.load(part_ptr + mat * chunks + p, mask=p < chunks, other=0.0)
    inv = 1.0 / (tl.sqrt(tl.sum(total, axis=0)) + eps)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    r = offs // cols
    c = offs % cols
    v = tl.load(g_ptr + mat * numel + r * s_gr + c * s_gc, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + mat * numel + offs, (v * inv).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bgemm(a_ptr, b_ptr, c_ptr, out_ptr, M, N, K,
           s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn, s_ob, s_om, s_on,
           alpha, beta, HAS_C: tl.constexpr, SYMMETRIC: tl.constexpr,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    # out = alpha * (A @ B) + beta * C, per matrix of the batch (grid axis 1). SYMMETRIC: the result
    # is symmetric (M == N, square tiles BM == BN): compute tiles on and below the diagonal, store the
    # others mirrored.
    pid = tl.program_id(0)
    mat = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Grouped order: GROUP_M row tiles share each column tile while it is in L2.
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    if SYMMETRIC and pid_n > pid_m:
        return
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_tile = a_ptr + mat * s_ab + rm[:, None] * s_am + rk[None, :] * s_ak
    b_tile = b_ptr + mat * s_bb + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in tl.range(0, K, BK):
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(b_tile, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BK * s_ak
        b_tile += BK * s_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    res = alpha * acc
    if HAS_C:
        c = tl.load(c_ptr + mat * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn, mask=mask, other=0.0)
        res += beta * c.to(tl.float32)
    res = res.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + mat * s_ob + rm[:, None] * s_om + rn[None, :] * s_on, res, mask=mask)
    if SYMMETRIC and pid_n < pid_m:
        # The mirrored tile: element (i, j) of this tile is (j, i) of the tile above the diagonal.
        tl.store(out_ptr + mat * s_ob + rn[None, :] * s_om + rm[:, None] * s_on, res, mask=mask)


def _gemm(a, b, c, out, alpha, beta, symmetric, tile):
    """out[i] = alpha * a[i] @ b[i] (+ beta * c[i] when c is given) for 3-d strided views; one launch."""
    batch, M, K = a.shape
    N = b.shape[2]
    if tile is None:
        bm, bn, bk = (max(16, min(most, triton.next_power_of_2(size)))
                      for most, size in zip(CPU_TILE_MAX, (M, N, K)))
        # Mirroring needs square tiles: tile (i, j) below the diagonal is tile (j, i) above it.
        tile = dict(BM=bm, BN=bm if symmetric else bn, BK=bk, GROUP_M=4, num_warps=4, num_stages=1)
    grid = (triton.cdiv(M, tile["BM"]) * triton.cdiv(N, tile["BN"]), batch)
    has_c = c is not None
    c = c if has_c else out  # never read: HAS_C is off
    _bgemm[grid](a, b, c, out, M, N, K, *a.stride(), *b.stride(), *c.stride(), *out.stride(), alpha, beta,
                 HAS_C=has_c, SYMMETRIC=symmetric, **tile)


def forward(g):
    batch, m, n = g.shape
    assert g.is_contiguous()
    # None: sized per GEMM for the interpreter (asked of Triton, not of the device: a compile for a GPU
    # without one, benchmarks/compile_sm90.py, gets the GPU tile).
    tile = None if triton.knobs.runtime.interpret else GPU_TILE
    tall = m > n
    p, q = (n, m) if tall else (m, n)
    numel = m * n
    out = torch.empty_like(g)
    chunks = triton.cdiv(numel, NORM_BLOCK * NORM_STEPS)
    part = torch.empty((batch, chunks), dtype=torch.float32, device=g.device)
    _sumsq_partials[(chunks, batch)](g, part, numel, chunks, BLOCK=NORM_BLOCK, STEPS_PER=NORM_STEPS, num_warps=8)
    x, x_next = torch.empty((batch, p, q), dtype=g.dtype, device=g.device), torch.empty((batch, p, q), dtype=g.dtype,
                                                                                        device=g.device)
    # X [p, q] from g [m, n]: element (r, c) of X is g[r, c], or g[c, r] for a tall g.
    s_gr, s_gc = (1, n) if tall else (n, 1)
    _scale[(triton.cdiv(numel, NORM_BLOCK), batch)](g, part, x, p, q, s_gr, s_gc, numel, chunks, EPS,
                                                    BLOCK=NORM_BLOCK, PART_BLOCK=256, num_warps=8)
    gram = torch.empty((batch, p, p), dtype=g.dtype, device=g.device)
    poly = torch.empty((batch, p, p), dtype=g.dtype, device=g.device)
    # The last step writes the output directly, transposed back for a tall input.
    final = out.transpose(1, 2) if tall else out
    for step in range(STEPS):
        _gemm(x, x.transpose(1, 2), None, gram, 1.0, 0.0, True, tile)          # A = X X^T
        _gemm(gram, gram, gram, poly, C_COEF, B_COEF, True, tile)               # B = b A + c A A
        dst = final if step == STEPS - 1 else x_next
        _gemm(poly, x, x, dst, 1.0, A_COEF, False, tile)                        # X = a X + B X
        x, x_next = x_next, x
    return out
