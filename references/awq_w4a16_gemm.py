"""AWQ w4a16 GEMM (int4 weights in AWQ's packing order, group 128): expert Triton reference.

Two designs, chosen on the host from M (no autotuning: the launches depend on the shapes alone).

Decode batches of fewer than DEQUANT_FROM_ROWS rows dequantise the weights in registers inside the K loop
and never write them anywhere: each K step loads a tile of packed int32 words (half a byte per weight of
HBM traffic), expands each word into its eight columns by a per-column shift (the column's AWQ nibble) and
mask, subtracts the group's zero points, multiplies by the group's scales, rounds to fp16 exactly as the
dequantised weight is defined, and feeds the fp16 tile to the tensor cores with an fp32 accumulator. Its
row tile is as small as the MMA allows; N alone gives too few column tiles to cover the SMs (14336 / 128 =
112 on a 132-SM GPU), so K is split into ranges of whole groups, each program writing an fp32 partial of
its range to a workspace that a second kernel sums in a fixed order and rounds to fp16 (deterministic, no
atomics).

From DEQUANT_FROM_ROWS rows on, the weights are dequantised once, by an elementwise kernel, into an fp16
[K, N] matrix (the same rounding: (q - z) in integers, times the scale in fp32, one rounding to fp16), and
a dense fp16 GEMM (tl.dot, fp32 accumulator, Hopper-sized tiles, grouped program order) multiplies.

Where the switch sits was measured, not derived: benchmarks/awq_large_m_gpu.py on an H100 80GB HBM3
(torch 2.11.0+cu130, triton 3.6.0, 2026-12-07), do_bench medians, cold L2:
    M x K x N          eager      fused     dequantised
    64x28672x8192      4.780 ms   2.471 ms  0.411 ms
    128x4096x14336     1.399 ms   0.729 ms  0.109 ms
    256x4096x14336     1.387 ms   1.442 ms  0.129 ms
    512x4096x14336         -      2.788 ms  0.175 ms
    2048x4096x14336    1.619 ms   9.903 ms  0.391 ms
and the dequantisation pass alone 0.058 ms at 4096x14336 (2571 GB/s). At every measured M >= 64 the
dequantised path is 6-25x faster than the fused kernel. M = 16 was not measured on that path: the fused
kernel took 0.629 ms at 16x4096x14336 (benchmarks/gemm_gpu.py, same run), and below 128 rows the dense
GEMM's 128-row tile makes 16 rows launch the same tiles over the same K as 128 rows do (0.109 ms), so the
switch at 16 is inferred from that tile argument. Below 16 rows the fused kernel's own tile is already the
MMA's smallest, so its time there should be about its 16-row time too; the fused path stays for them, as
the decode design that writes no fp16 copy of the weights, until the sweep's 1-row line (the benchmark's
table 3) says whether the switch should go lower.

The floors on an H100 (~990 TFLOP/s dense fp16, ~3.35 TB/s HBM), and why the measured switch is so low:
- 2048x4096x14336. FLOPs: 2 * 2048 * 14336 * 4096 = 240.5 GFLOP -> 243 us. The one-pass bytes (x 16.8 MB,
  packed weights 29.4 MB, zeros and scales 1.1 MB, y 58.7 MB: 106 MB) take 32 us, so the task is
  compute-bound: 243 us. The two-pass design adds the dequantisation pass: it reads the 30.5 MB of packed
  weights, zeros and scales and writes the 117.4 MB fp16 matrix (148 MB: 44 us), which nothing overlaps
  with the GEMM. The GEMM then reads that matrix instead of the packed words (193 MB in all: 58 us), still
  under its 243 us of MMA. Floor of the design: 44 + 243 = 287 us, 18% above the one-pass floor; the
  dequantised matrix is 2x the output. Measured: 0.391 ms, 73% of that floor.
- 16x4096x14336. The fused floor is its bytes, about 31 MB (packed weights, zeros and scales; x and y are
  under 0.6 MB): 9 us. The two-pass floor is the 44 us pass plus a GEMM bound by reading the 117.4 MB fp16
  matrix (35 us): 79 us, and the matrix is 256x the output. By the floors the fused design wins here
  (and up to a few hundred rows: at M = 256 its floor is 30 us against 82 us), but the fused kernel runs
  far from its floor: 0.629 ms at 16 rows is 1.5% of it, and at 2048 rows it reached 25 TFLOP/s (the
  per-tile expansion on the CUDA cores starves the tensor cores). The two-pass path runs near its own
  floor (0.109 ms at 128 rows against a 79-80 us floor), so it is the faster code from 16 rows on, at the
  price of an fp16 weight matrix in memory, as the eager baseline also writes. A fused kernel near its
  floor would move the switch back up to hundreds of rows.
"""

import torch
import triton
import triton.language as tl

GROUP = 128
PACK = 8
GROUP_M = 8  # row tiles per band of the grouped program order

DEQUANT_FROM_ROWS = 16  # from this many rows on, forward dequantises once and runs a dense GEMM
# The fused kernel's configs: decode rows (up to SMALL_M_ROWS) and more. forward takes the fused kernel only
# below DEQUANT_FROM_ROWS, so LARGE_M serves fused_forward called directly (the benchmark's M sweep).
LARGE_M = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
# Three stages: at four, a 16-64 row tile asks for 243-296 KB of shared memory, past the 227 KB an
# sm_90 block may have (benchmarks/compile_sm90.py; the H100 refused it on 2026-12-07).
SMALL_M = {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}
SMALL_M_ROWS = 64  # up to this many rows, the weights dominate the traffic
MIN_BLOCK_M = 16  # the smallest row tile of an fp16 MMA
MIN_PROGRAMS = 264  # two per SM on an H100 / H200: split K until the grid has as many
REDUCE_BLOCK = 1024

# The dense GEMM's configs: 128x256 output tiles where they still give every SM two tiles, else 128x128.
# Both take two warpgroups and a K step of 64; shared memory per stage is 48 KB and 32 KB. The workloads
# under 128 rows (16x4096x14336, 64x28672x8192) get the square tile: one row tile, its unused rows
# wrapping onto valid ones. A 64-row tile would halve the MMA work of those padding rows, but there the
# GEMM is bound by reading the fp16 matrix (16 rows: 15 us of 128-row MMA under 35 us of reading), and no
# smaller tile was measured, so none is chosen.
GEMM_WIDE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
GEMM_SQUARE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4}
# The dequantisation tile: a quarter of a group by 256 columns (32 words), 64 weights per thread of four warps.
DEQUANT_BLOCK_K = 32
DEQUANT_BLOCK_N = 256


@triton.jit
def _grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """The (row tile, column tile) of program pid: programs walk bands of GROUP_M row tiles column by
    column, so the GROUP_M row tiles that run together read each weight tile while it is in L2."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_band = GROUP_M * tiles_n
    first_m = (pid // per_band) * GROUP_M
    band_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (pid % per_band) % band_rows, (pid % per_band) // band_rows


@triton.jit
def _awq_gemm_kernel(
    x_ptr, qw_ptr, qz_ptr, s_ptr, out_ptr,
    M, N, K, groups_per_split,
    stride_xm, stride_qw, stride_qz, stride_s, stride_om, stride_osplit,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Edge rows and columns wrap onto valid ones (never stored), so the loads need no mask; N is a
    # multiple of 8, so a wrapped column still reads a whole packed word.
    rows = (offs_m % M).to(tl.int64)
    cols = offs_n % N
    words = cols // 8
    # Column 8j + c sits in nibble (c // 2) + 4 * (c % 2) of word j: AWQ's order 0, 4, 1, 5, 2, 6, 3, 7.
    shifts = ((cols % 8) // 2 + (cols % 2) * 4) * 4
    offs_k = tl.arange(0, BLOCK_K)

    k_start = split * groups_per_split * GROUP
    k_end = tl.minimum(k_start + groups_per_split * GROUP, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        g = k // GROUP  # BLOCK_K divides GROUP: one group per step
        z = (tl.load(qz_ptr + g * stride_qz + words) >> shifts) & 0xF
        s = tl.load(s_ptr + g * stride_s + cols).to(tl.float32)
        ks = k + offs_k
        x = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :])
        q = (tl.load(qw_ptr + ks.to(tl.int64)[:, None] * stride_qw + words[None, :]) >> shifts[None, :]) & 0xF
        # (q - z) * s is exact in fp32; one rounding to fp16 gives the defined dequantised weight.
        w = ((q - z[None, :]).to(tl.float32) * s[None, :]).to(tl.float16)
        acc = tl.dot(x, w, acc)

    out = out_ptr + split.to(tl.int64) * stride_osplit
    out_ptrs = out + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _sum_splits_kernel(ws_ptr, y_ptr, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLITS):  # a fixed order: the same sum every call
        total += tl.load(ws_ptr + s * n + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, total.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dequantise_kernel(
    qw_ptr, qz_ptr, s_ptr, w_ptr,
    N, stride_qw, stride_qz, stride_s, stride_w,
    GROUP: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # One tile of BLOCK_K rows (inside one group: BLOCK_K divides GROUP, and K is a multiple of GROUP,
    # so no row is out of range) by BLOCK_N columns (BLOCK_N / 8 packed words) of the fp16 [K, N] matrix.
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    # Words past the last wrap onto valid ones for the loads (N is a multiple of 8: whole words); their
    # columns are not stored.
    words = (tl.program_id(1) * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)) % (N // 8)
    # Column c of a word sits in nibble (c // 2) + 4 * (c % 2): AWQ's order 0, 4, 1, 5, 2, 6, 3, 7.
    nibble = tl.arange(0, 8)
    shifts = ((nibble // 2) + (nibble % 2) * 4) * 4
    g = tl.program_id(0) * BLOCK_K // GROUP
    # Each word is loaded once and expanded in registers to its eight columns ([words, 8] -> columns in
    # order, as word j holds columns 8j .. 8j + 7), the zero points the same way as the weights.
    z = tl.reshape((tl.load(qz_ptr + g * stride_qz + words)[:, None] >> shifts[None, :]) & 0xF, (BLOCK_N,))
    s = tl.load(s_ptr + g * stride_s + offs_n % N).to(tl.float32)
    packed = tl.load(qw_ptr + offs_k.to(tl.int64)[:, None] * stride_qw + words[None, :])
    q = tl.reshape((packed[:, :, None] >> shifts[None, None, :]) & 0xF, (BLOCK_K, BLOCK_N))
    # The definition's rounding, as in the fused kernel: (q - z) * s exact in fp32, rounded once to fp16.
    w = ((q - z[None, :]).to(tl.float32) * s[None, :]).to(tl.float16)
    # The pass is bound by this store (4x the packed bytes it reads): whole rows of BLOCK_N contiguous halves.
    tl.store(w_ptr + offs_k.to(tl.int64)[:, None] * stride_w + offs_n[None, :], w, mask=(offs_n < N)[None, :])


@triton.jit
def _fp16_gemm_kernel(
    x_ptr, w_ptr, y_ptr, M, N, K,
    stride_xm, stride_wk, stride_ym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Edge rows and columns wrap onto valid ones for the loads and are masked at the store; BLOCK_K
    # divides GROUP, which divides K, so the K loop needs no mask either: the loads pipeline unmasked.
    rows = (offs_m % M).to(tl.int64)
    cols = offs_n % N
    x_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_k.to(tl.int64)[:, None] * stride_wk + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(x_ptrs), tl.load(w_ptrs), acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    # The fp32 sum over all of K, rounded once to fp16.
    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def launch_config(M, N, K):
    """The fused kernel's tiles, warps, pipeline depth and K split for an M x N output over K (module docstring)."""
    n_groups = K // GROUP
    if M > SMALL_M_ROWS:
        return dict(LARGE_M, SPLIT_K=1, groups_per_split=n_groups)
    cfg = dict(SMALL_M, BLOCK_M=max(MIN_BLOCK_M, triton.next_power_of_2(M)))
    tiles = triton.cdiv(N, cfg["BLOCK_N"])
    split = max(1, min(n_groups, triton.cdiv(MIN_PROGRAMS, tiles)))
    per_split = triton.cdiv(n_groups, split)
    return dict(cfg, SPLIT_K=triton.cdiv(n_groups, per_split), groups_per_split=per_split)


def gemm_config(M, N):
    """The dense GEMM's tiles: the wide tile while it leaves at least MIN_PROGRAMS of them, else square."""
    wide = triton.cdiv(M, GEMM_WIDE["BLOCK_M"]) * triton.cdiv(N, GEMM_WIDE["BLOCK_N"])
    return dict(GEMM_WIDE if wide >= MIN_PROGRAMS else GEMM_SQUARE)


def fused_forward(x, qweight, qzeros, scales, cfg=None):
    """y = x @ W with the weights dequantised in registers (any M; forward uses it below DEQUANT_FROM_ROWS)."""
    M, K = x.shape
    N = scales.shape[1]
    cfg = cfg or launch_config(M, N, K)
    y = torch.empty((M, N), dtype=torch.float16, device=x.device)
    split = cfg["SPLIT_K"]
    # Every split writes its whole [M, N] partial (zeros where its range is empty), so empty suffices.
    target = y if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]), split)
    _awq_gemm_kernel[grid](
        x, qweight, qzeros, scales, target,
        M, N, K, cfg["groups_per_split"],
        x.stride(0), qweight.stride(0), qzeros.stride(0), scales.stride(0), N, M * N,
        GROUP=GROUP, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"], GROUP_M=GROUP_M,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    if split > 1:
        _sum_splits_kernel[(triton.cdiv(M * N, REDUCE_BLOCK),)](target, y, M * N, SPLITS=split, BLOCK=REDUCE_BLOCK)
    return y


def dequantise(qweight, qzeros, scales):
    """The fp16 [K, N] weight matrix the task defines, written once."""
    K = qweight.shape[0]
    N = scales.shape[1]
    w = torch.empty((K, N), dtype=torch.float16, device=qweight.device)
    grid = (K // DEQUANT_BLOCK_K, triton.cdiv(N, DEQUANT_BLOCK_N))
    _dequantise_kernel[grid](qweight, qzeros, scales, w, N, qweight.stride(0), qzeros.stride(0), scales.stride(0),
                             w.stride(0), GROUP=GROUP, BLOCK_K=DEQUANT_BLOCK_K, BLOCK_N=DEQUANT_BLOCK_N, num_warps=4)
    return w


def dequantised_forward(x, qweight, qzeros, scales, cfg=None):
    """y = x @ W with W dequantised once to fp16 and a dense GEMM (any M; forward uses it from DEQUANT_FROM_ROWS)."""
    M, K = x.shape
    N = scales.shape[1]
    cfg = cfg or gemm_config(M, N)
    w = dequantise(qweight, qzeros, scales)
    y = torch.empty((M, N), dtype=torch.float16, device=x.device)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _fp16_gemm_kernel[grid](
        x, w, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"], GROUP_M=GROUP_M,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    return y


def forward(x, qweight, qzeros, scales):
    M, K = x.shape
    N = scales.shape[1]
    assert K % GROUP == 0 and N % PACK == 0, f"K={K} must be a multiple of {GROUP} and N={N} of {PACK}"
    assert x.stride(1) == 1 and qweight.stride(1) == 1 and qzeros.stride(1) == 1 and scales.stride(1) == 1
    if M >= DEQUANT_FROM_ROWS:
        return dequantised_forward(x, qweight, qzeros, scales)
    return fused_forward(x, qweight, qzeros, scales)
