"""Block-scaled fp8 GEMM (w8a8, 1x128 activation and 128x128 weight scales): expert Triton reference.

C[M, N] = sum over K blocks k of (A_k @ B_k^T) * a_scale[:, k] (outer) b_scale[n // 128, k], in fp32,
rounded once to bf16. The operands are never dequantised: each K step multiplies raw fp8 tiles on
the tensor cores into a fresh fp32 partial product, then scales that partial by the outer product of
the step's activation scales (one per row) and weight scales (one per 128 columns) and adds it to the
fp32 accumulator. BLOCK_K is the scale block, so every step has exactly one scale per row and column;
it also promotes the tensor core's partial sum to a full fp32 add every 128 products, which bounds
the error of Hopper's narrower fp8 accumulator.

Tiles are chosen on the host from M (no autotuning: the launch depends on the shapes alone):
- large M is compute-bound: 128x128 tiles, 8 warps (two warpgroups), a 4-stage load pipeline
  (4 x 32 KB of fp8 tiles in shared memory) and grouped program order so that a group of
  GROUP_M row tiles shares each weight tile in L2. 128x256 would double the reuse but needs the
  fresh partial product and the accumulator both in registers: 256 fp32 per thread, which spills.
- small M (decode) is bound by streaming the weights once: a 64-row tile (the smallest wgmma) and
  narrow column tiles so that enough programs cover every SM (N = 7168 gives 224 programs), each
  with a deeper pipeline to keep more weight bytes in flight. Where N is so wide that wider tiles
  still give every SM a program, the tiles widen (fewer, longer programs, less per-program setup),
  with a second warpgroup once the fresh partial and the accumulator need it.
"""

import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128  # the quantisation block: 1x128 for activations, 128x128 for weights
GROUP_M = 8

LARGE_M = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 4}
SMALL_M = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 6}
SMALL_M_ROWS = 128  # at most this many rows: the weights dominate the traffic
MAX_SMALL_M_BLOCK_N = 256
MIN_PROGRAMS = 132  # one per SM on an H100 / H200
SMEM_BYTES = 192 * 1024  # of the 227 KB an H100 SM gives one CTA: the pipeline's fp8 tiles, with room for the epilogue
ELEMS_PER_WARP = 2048  # output elements per warp: 64 fp32 registers per thread for each of acc and partial


@triton.jit
def _w8a8_block_fp8_gemm_kernel(
    a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr,
    M, N, K,
    stride_am, stride_asm, stride_ask, stride_bn, stride_bsn, stride_bsk, stride_cm,
    SCALE_BLOCK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
):
    # Grouped order: consecutive programs walk GROUP_M row tiles down one column of tiles, so the
    # weight tiles they read are still in L2 for the next programs.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows and columns past the edge wrap onto valid ones: loads need no mask (K is a multiple of the
    # block), and the wrapped results are never stored.
    rows = (offs_m % M).to(tl.int64)
    cols = (offs_n % N).to(tl.int64)
    offs_k = tl.arange(0, SCALE_BLOCK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :]
    # B is [N, K] with K contiguous: the [K, N] tile is K-major, the operand layout fp8 wgmma needs.
    b_ptrs = b_ptr + cols[None, :] * stride_bn + offs_k[:, None]
    as_ptrs = as_ptr + rows * stride_asm
    bs_ptrs = bs_ptr + (cols // SCALE_BLOCK) * stride_bsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, SCALE_BLOCK)):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        a_s = tl.load(as_ptrs + k * stride_ask)
        b_s = tl.load(bs_ptrs + k * stride_bsk)
        # A fresh fp32 partial per block, scaled then added: the promotion to full fp32 every 128.
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += SCALE_BLOCK
        b_ptrs += SCALE_BLOCK

    c = acc.to(c_ptr.dtype.element_ty)
    out_rows = offs_m.to(tl.int64)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def launch_config(M, N):
    """Tile sizes, warps and pipeline depth for an M x N output (module docstring)."""
    if M > SMALL_M_ROWS:
        return dict(LARGE_M)
    cfg = dict(SMALL_M)
    tiles_m = triton.cdiv(M, cfg["BLOCK_M"])
    while cfg["BLOCK_N"] < MAX_SMALL_M_BLOCK_N and tiles_m * triton.cdiv(N, 2 * cfg["BLOCK_N"]) >= MIN_PROGRAMS:
        cfg["BLOCK_N"] *= 2
    cfg["num_warps"] = max(cfg["num_warps"], cfg["BLOCK_M"] * cfg["BLOCK_N"] // ELEMS_PER_WARP)
    stage_bytes = (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * SCALE_BLOCK
    cfg["num_stages"] = min(cfg["num_stages"], SMEM_BYTES // stage_bytes)
    return cfg


def forward(a, a_scales, b, b_scales):
    M, K = a.shape
    N = b.shape[0]
    assert K % SCALE_BLOCK == 0, f"K={K} must be a multiple of {SCALE_BLOCK}"
    assert a.stride(1) == 1 and b.stride(1) == 1, "A and B must have contiguous rows"
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    cfg = launch_config(M, N)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _w8a8_block_fp8_gemm_kernel[grid](
        a, a_scales, b, b_scales, c,
        M, N, K,
        a.stride(0), a_scales.stride(0), a_scales.stride(1), b.stride(0), b_scales.stride(0), b_scales.stride(1),
        c.stride(0),
        SCALE_BLOCK=SCALE_BLOCK, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], GROUP_M=GROUP_M,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
    )
    return c
