"""Fused linear cross-entropy: expert Triton reference.

Eager holds the [BT, V] logits in bf16, their fp32 copy, the softmax and its gradient: several GiB
on the workloads. Here tokens go through in chunks, and one chunk buffer of bf16 logits is reused:
per chunk, a GEMM writes the chunk's logits (h_chunk @ W^T), a row kernel computes each row's
log-sum-exp online (one pass for max and sum, a second for the gradient) and overwrites the logits
with dz = (softmax - onehot) / n in place, then two GEMMs project dz at once: grad_h of the chunk
(dz @ W, written once) and grad_W (dz^T @ h_chunk, added to the fp32 output). The loss is a per-token
buffer summed by one last program, so it is deterministic; n, the number of tokens with a target,
is counted on the device (no host sync), before the first chunk needs it.

Memory: the chunk's rows are as many as fit 4*max(BT*H, V) bytes of bf16 logits (as large as h in
fp32), rounded down to whole GEMM tiles of rows: 512 or 768 rows on the workloads, so 8 to 22 chunks.
Time: the three GEMMs are 6*BT*H*V FLOPs; the cost beyond them is re-reading and re-writing the fp32
grad_W once per chunk (8*V*H bytes each), which is why the chunk is as large as the budget allows
rather than a fixed small size.
"""

import torch
import triton
import triton.language as tl

IGNORE_INDEX = -100
# sm_90 GEMM tile: 128x256 outputs per program with 64-deep K steps, 8 warps and 3 stages: the largest
# tile whose bf16 operand stages (3 x 48 KB) fit shared memory, so each byte loaded feeds the most
# tensor-core work. Group 8 row tiles per column sweep so a W (or h) tile is reused from L2.
GPU_GEMM = dict(BM=128, BN=256, BK=64, GROUP=8, num_warps=8, num_stages=3)
# grad_h's GEMM has only chunk x H outputs (512 x 4096: 64 tiles of 128x256, half of the 132 SMs idle) and a
# K of V: 128x128 tiles double the programs so every SM has one, each still with 2000 K steps to pipeline.
GPU_GEMM_FEW_TILES = dict(BM=128, BN=128, BK=64, GROUP=8, num_warps=8, num_stages=4)
# The interpreter runs a tile as numpy: small tiles keep the masked tail work of smoke shapes small.
CPU_GEMM = dict(BM=32, BN=64, BK=32, GROUP=4)
GPU_ROW_BLOCK = 4096   # a row of 128K logits in 32 steps of 8 KB, 16 bytes per thread per step at 8 warps
CPU_ROW_BLOCK = 128


@triton.jit
def _count_targets(t_ptr, n_ptr, BT, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    """n_ptr[0] = the number of tokens whose target is not IGNORE (as fp32, the divisor of the mean)."""
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, BT, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        t = tl.load(t_ptr + offs, mask=offs < BT, other=IGNORE)
        acc += (t != IGNORE).to(tl.float32)
    tl.store(n_ptr, tl.sum(acc, axis=0))


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
          ACCUMULATE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    """C[M, N] (+)= A[M, K] @ B[K, N] for any strides (transposes are strides), fp32 accumulation,
    rounded once to C's dtype."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows_here = tl.minimum(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % rows_here
    pid_n = (pid % per_group) // rows_here
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # int64 row and column offsets: V * H passes 2^31 on the workloads.
    a = a_ptr + rm[:, None].to(tl.int64) * s_am + rk[None, :].to(tl.int64) * s_ak
    b = b_ptr + rk[:, None].to(tl.int64) * s_bk + rn[None, :].to(tl.int64) * s_bn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        in_k = rk + k < K
        av = tl.load(a, mask=(rm[:, None] < M) & in_k[None, :], other=0.0)
        bv = tl.load(b, mask=in_k[:, None] & (rn[None, :] < N), other=0.0)
        acc = tl.dot(av, bv, acc)
        a += BK * s_ak
        b += BK * s_bk
    c = c_ptr + rm[:, None].to(tl.int64) * s_cm + rn[None, :].to(tl.int64) * s_cn
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    if ACCUMULATE:
        acc += tl.load(c, mask=inside, other=0.0).to(tl.float32)
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _loss_and_dz(z_ptr, t_ptr, n_ptr, loss_ptr, V, s_z, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    """One row of the chunk: its loss / n into loss_ptr[row], and its logits overwritten by dz."""
    row = tl.program_id(0)
    z_row = z_ptr + row.to(tl.int64) * s_z
    target = tl.load(t_ptr + row)
    valid = target != IGNORE
    cols = tl.arange(0, BLOCK)
    # Online max and sum of exponentials, lane by lane; -1e30 (not -inf) as the start so a lane that
    # only ever sees masked -inf gives exp(0) * 0, never inf - inf.
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + cols
        z = tl.load(z_row + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, z)
        s = s * tl.exp(m - m_new) + tl.exp(z - m_new)
        m = m_new
    top = tl.max(m, axis=0)
    lse = top + tl.log(tl.sum(s * tl.exp(m - top), axis=0))
    z_target = tl.load(z_row + tl.where(valid, target, 0)).to(tl.float32)
    n = tl.load(n_ptr)
    tl.store(loss_ptr + row, tl.where(valid, (lse - z_target) / n, 0.0))
    scale = tl.where(valid, 1.0 / n, 0.0)
    for start in range(0, V, BLOCK):
        offs = start + cols
        z = tl.load(z_row + offs, mask=offs < V, other=0.0).to(tl.float32)
        dz = (tl.exp(z - lse) - (offs == target).to(tl.float32)) * scale
        tl.store(z_row + offs, dz.to(z_ptr.dtype.element_ty), mask=offs < V)


@triton.jit
def _sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def _matmul(a, a_strides, b, b_strides, c, M, N, K, accumulate, tile):
    grid = (triton.cdiv(M, tile["BM"]) * triton.cdiv(N, tile["BN"]),)
    _gemm[grid](a, b, c, M, N, K, *a_strides, *b_strides, c.stride(0), c.stride(1), ACCUMULATE=accumulate, **tile)


def forward(h, weight, targets):
    BT, H = h.shape
    V = weight.shape[0]
    assert weight.shape == (V, H) and targets.shape == (BT,)
    assert h.is_contiguous() and weight.is_contiguous() and targets.is_contiguous()
    gpu = not triton.knobs.runtime.interpret  # the interpreter's tiles are small (see CPU_GEMM)
    tile, row_block = (GPU_GEMM, GPU_ROW_BLOCK) if gpu else (CPU_GEMM, CPU_ROW_BLOCK)
    few_tiles = GPU_GEMM_FEW_TILES if gpu else CPU_GEMM
    loss = torch.empty((), dtype=torch.float32, device=h.device)
    grad_h = torch.empty_like(h)
    grad_w = torch.empty((V, H), dtype=torch.float32, device=h.device)
    n = torch.empty(1, dtype=torch.float32, device=h.device)
    token_loss = torch.empty(BT, dtype=torch.float32, device=h.device)
    # As many bf16 logit rows as 4 * max(BT*H, V) bytes hold, in whole GEMM row tiles where that is one.
    rows = 2 * max(BT * H, V) // V
    chunk = min(BT, rows // tile["BM"] * tile["BM"] if rows >= tile["BM"] else rows)
    z = torch.empty((chunk, V), dtype=h.dtype, device=h.device)

    _count_targets[(1,)](targets, n, BT, IGNORE=IGNORE_INDEX, BLOCK=1024)
    for c0 in range(0, BT, chunk):
        m = min(chunk, BT - c0)
        h_c = h[c0:c0 + m]
        # z = h_c @ W^T: W read through strides (k along H, n along V).
        _matmul(h_c, (H, 1), weight, (1, H), z, m, V, H, False, tile)
        _loss_and_dz[(m,)](z, targets[c0:c0 + m], n, token_loss[c0:c0 + m], V, V, IGNORE=IGNORE_INDEX,
                           BLOCK=min(row_block, triton.next_power_of_2(V)), num_warps=8 if gpu else 1)
        # grad_h of the chunk = dz @ W, written once; grad_W (+)= dz^T @ h_c, in fp32.
        _matmul(z, (V, 1), weight, (H, 1), grad_h[c0:c0 + m], m, H, V, False, few_tiles)
        _matmul(z, (1, V), h_c, (H, 1), grad_w, V, H, m, c0 > 0, tile)
    _sum[(1,)](token_loss, loss, BT, BLOCK=1024)
    return loss, grad_h, grad_w
