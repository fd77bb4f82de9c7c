"""AWQ w4a16 GEMM (int4 weights in AWQ's packing order, group 128): expert Triton reference.

The weights are dequantised in registers inside the K loop and never written anywhere: each K step
loads a tile of packed int32 words (half a byte per weight of HBM traffic), expands each word into its
eight columns by a per-column shift (the column's AWQ nibble) and mask, subtracts the group's zero
points and multiplies by the group's scales, rounds to fp16 exactly as the dequantised weight is
defined, and feeds the fp16 tile to the tensor cores with an fp32 accumulator.

Tiles are chosen on the host from M (no autotuning: the launch depends on the shapes alone):
- large M is compute-bound: 128x128 output tiles, two warpgroups, a K step of 64 (half a group: the
  dequantisation of a 64x128 tile is 32 values per thread, hidden under the MMA), grouped program order
  so that a band of row tiles shares each weight tile in L2.
- small M (decode) streams the weights once and is bound by it. Its row tile is as small as the MMA
  allows; N alone gives too few column tiles to cover the SMs (14336 / 128 = 112 on a 132-SM GPU), so
  K is split into ranges of whole groups, each program writing an fp32 partial of its range to a
  workspace that a second kernel sums in a fixed order and rounds to fp16 (deterministic, no atomics).
"""

import torch
import triton
import triton.language as tl

GROUP = 128
PACK = 8
GROUP_M = 8

LARGE_M = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
# Three stages: at four, a 16-64 row tile asks for 243-296 KB of shared memory, past the 227 KB an
# sm_90 block may have (benchmarks/compile_sm90.py; the H100 refused it on 2026-12-07).
SMALL_M = {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}
SMALL_M_ROWS = 64  # up to this many rows, the weights dominate the traffic
MIN_BLOCK_M = 16  # the smallest row tile of an fp16 MMA
MIN_PROGRAMS = 264  # two per SM on an H100 / H200: split K until the grid has as many
REDUCE_BLOCK = 1024


@triton.jit
def _awq_gemm_kernel(
    x_ptr, qw_ptr, qz_ptr, s_ptr, out_ptr,
    M, N, K, groups_per_split,
    stride_xm, stride_qw, stride_qz, stride_s, stride_om, stride_osplit,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

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


def launch_config(M, N, K):
    """Tiles, warps, pipeline depth and K split for an M x N output over K (module docstring)."""
    n_groups = K // GROUP
    if M > SMALL_M_ROWS:
        return dict(LARGE_M, SPLIT_K=1, groups_per_split=n_groups)
    cfg = dict(SMALL_M, BLOCK_M=max(MIN_BLOCK_M, triton.next_power_of_2(M)))
    tiles = triton.cdiv(N, cfg["BLOCK_N"])
    split = max(1, min(n_groups, triton.cdiv(MIN_PROGRAMS, tiles)))
    per_split = triton.cdiv(n_groups, split)
    return dict(cfg, SPLIT_K=triton.cdiv(n_groups, per_split), groups_per_split=per_split)


def forward(x, qweight, qzeros, scales):
    M, K = x.shape
    N = scales.shape[1]
    assert K % GROUP == 0 and N % PACK == 0, f"K={K} must be a multiple of {GROUP} and N={N} of {PACK}"
    assert x.stride(1) == 1 and qweight.stride(1) == 1 and qzeros.stride(1) == 1 and scales.stride(1) == 1
    cfg = launch_config(M, N, K)
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
