"""Fused MoE block in bf16 (gate/up GEMM, SiLU * up, down GEMM, weighted sum over the top-k):
expert Triton reference.

The token slots (token t's j-th expert is slot t * k + j) are counting-sorted by expert into runs
padded to whole BLOCK_M blocks, so every M block of the grouped GEMMs belongs to one expert
(three small kernels, no host sync: the padded length is known from shapes alone). Then:
1. gate/up GEMM with SiLU * up in its epilogue: each program gathers BLOCK_M rows of hidden_states by
   slot index (never a permuted copy) and accumulates the gate and the up columns of the same
   BLOCK_N outputs in two fp32 tiles, so the [slots, 2I] product is never written; act [slots, I]
   bf16 is;
2. down GEMM over act rows by slot, the router weight applied in the epilogue, one bf16 row per slot;
3. a sum over each token's k slot rows in fp32, rounded once to the bf16 output.
Blocks past the padded total (a data-dependent count the kernels read from memory) exit at once.
"""

import torch
import triton
import triton.language as tl

# Tiles per regime of tokens per expert (T * k / E), for sm_90 (H100/H200). Decode (a few tokens per
# expert) streams weights: a 16-row M tile wastes little on padding, and a deep K step keeps enough
# weight bytes in flight per program. Mid-size uses 64-row tiles. Prefill is compute-bound: 128x128
# output tiles (the gate/up GEMM holds two 128x64 accumulators for the same 128 outputs) at 8 warps
# feed wgmma with 64-wide K steps and a 3-stage pipeline within the 228 KB of shared memory.
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); BLOCK_N of the gate/up GEMM is half of it.
DECODE = (16, 64, 128, 4, 4)
MID = (64, 128, 64, 4, 4)
PREFILL = (128, 128, 64, 8, 3)
DECODE_TOKENS_PER_EXPERT = 32
MID_TOKENS_PER_EXPERT = 256
GROUP_M = 8  # M blocks swept per column band: consecutive blocks share an expert's weight tiles in L2
ALIGN_TOKENS_PER_PROGRAM = 4096
ALIGN_BLOCKS_PER_PROGRAM = 32
SUM_BLOCK = 1024


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    tl.atomic_add(counts_ptr + tl.load(ids_ptr + offs, mask=mask, other=0), 1, mask=mask)


@triton.jit
def _layout_kernel(counts_ptr, starts_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr, n_experts, n_sorted, n_blocks,
                   sentinel, BLOCK_M: tl.constexpr, EXPERTS: tl.constexpr, BLOCKS: tl.constexpr):
    e = tl.arange(0, EXPERTS)
    e_mask = e < n_experts
    counts = tl.load(counts_ptr + e, mask=e_mask, other=0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    total = tl.sum(padded, axis=0)
    if tl.program_id(0) == 0:
        tl.store(starts_ptr + e, ends - padded, mask=e_mask)
        tl.store(post_pad_ptr, total)
    b = tl.program_id(0) * BLOCKS + tl.arange(0, BLOCKS)
    b_mask = b < n_blocks
    first = b * BLOCK_M
    before = (ends[None, :] <= first[:, None]) & e_mask[None, :]
    owner = tl.sum(before.to(tl.int32), axis=1)
    owner_start = tl.sum(tl.where(before, padded[None, :], 0), axis=1)
    used = first < total
    tl.store(expert_ids_ptr + b, tl.where(used, owner, -1), mask=b_mask)
    owner_count = tl.load(counts_ptr + owner, mask=b_mask & used, other=0)
    slot = first[:, None] + tl.arange(0, BLOCK_M)[None, :]
    padding = slot - owner_start[:, None] >= owner_count[:, None]
    tl.store(sorted_ptr + slot, tl.full(slot.shape, sentinel, tl.int32),
             mask=b_mask[:, None] & padding & (slot < n_sorted))


@triton.jit
def _scatter_kernel(ids_ptr, starts_ptr, sorted_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    slot = tl.atomic_add(starts_ptr + tl.load(ids_ptr + offs, mask=mask, other=0), 1, mask=mask)
    tl.store(sorted_ptr + slot, offs, mask=mask)


@triton.jit
def _block_coords(n_m_blocks, n_n_blocks, GROUP_M: tl.constexpr):
    """Grouped program order: GROUP_M M blocks per band of N blocks."""
    pid = tl.program_id(0)
    per_group = GROUP_M * n_n_blocks
    first_m = (pid // per_group) * GROUP_M
    size = tl.minimum(n_m_blocks - first_m, GROUP_M)
    return first_m + (pid % per_group) % size, (pid % per_group) // size


@triton.jit
def _gate_up_silu_kernel(x_ptr, w1_ptr, act_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                         numel, top_k, H, I, n_m_blocks, stride_xm, stride_we, stride_wn, stride_am,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = _block_coords(n_m_blocks, tl.cdiv(I, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_pad_ptr):
        return  # padding blocks past the total: nothing to compute
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = slots < numel
    tokens = (slots // top_k).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < I
    k = tl.arange(0, BLOCK_K)
    a_ptrs = x_ptr + tokens[:, None] * stride_xm + k[None, :]
    # [BLOCK_K, BLOCK_N] tiles of w1[e]^T: gate rows n, up rows I + n.
    g_ptrs = w1_ptr + expert * stride_we + n[None, :].to(tl.int64) * stride_wn + k[:, None]
    u_ptrs = g_ptrs + I * stride_wn
    gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(H, BLOCK_K)):
        k_ok = k < H - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        gate = tl.dot(a, tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), gate)
        up = tl.dot(a, tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), up)
        a_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    act = gate / (1.0 + tl.exp(-gate)) * up
    out_ptrs = act_ptr + slots[:, None].to(tl.int64) * stride_am + n[None, :]
    tl.store(out_ptrs, act.to(act_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


@triton.jit
def _down_kernel(act_ptr, w2_ptr, y_ptr, weights_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                 numel, H, I, n_m_blocks, stride_am, stride_we, stride_wn, stride_ym,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = _block_coords(n_m_blocks, tl.cdiv(H, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_pad_ptr):
        return
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = slots < numel
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < H
    k = tl.arange(0, BLOCK_K)
    a_ptrs = act_ptr + slots[:, None].to(tl.int64) * stride_am + k[None, :]
    b_ptrs = w2_ptr + expert * stride_we + n[None, :].to(tl.int64) * stride_wn + k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(I, BLOCK_K)):
        k_ok = k < I - kk * BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(a, tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    # The router weight in the epilogue: one multiply per output, no extra pass.
    acc = acc * tl.load(weights_ptr + slots, mask=row_ok, other=0.0)[:, None]
    out_ptrs = y_ptr + slots[:, None].to(tl.int64) * stride_ym + n[None, :]
    tl.store(out_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


@triton.jit
def _sum_topk_kernel(y_ptr, out_ptr, top_k, H, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in range(top_k):
        acc += tl.load(y_ptr + (t * top_k + j) * H + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * H + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def tiles(T, E, top_k):
    """The tile regime for T tokens routed to top_k of E experts (from shapes alone)."""
    per_expert = T * top_k / E
    if per_expert <= DECODE_TOKENS_PER_EXPERT:
        return DECODE
    return MID if per_expert <= MID_TOKENS_PER_EXPERT else PREFILL


def forward(hidden_states, w1, w2, topk_weights, topk_ids):
    T, H = hidden_states.shape
    E, two_i, _ = w1.shape
    I = two_i // 2
    top_k = topk_ids.shape[1]
    assert hidden_states.stride(1) == 1 and w1.stride(2) == 1 and w2.stride(2) == 1
    assert topk_ids.is_contiguous() and topk_weights.is_contiguous()
    device = hidden_states.device
    BLOCK_M, BLOCK_N, BLOCK_K, warps, stages = tiles(T, E, top_k)

    # Counting sort of the slots by expert, each run padded to whole BLOCK_M blocks.
    numel = T * top_k
    n_sorted = numel + E * (BLOCK_M - 1)
    n_m_blocks = triton.cdiv(n_sorted, BLOCK_M)
    sorted_ids = torch.empty((n_sorted,), dtype=torch.int32, device=device)
    expert_ids = torch.empty((n_m_blocks,), dtype=torch.int32, device=device)
    post_pad = torch.empty((1,), dtype=torch.int32, device=device)
    work = torch.zeros((2 * E,), dtype=torch.int32, device=device)
    counts, starts = work[:E], work[E:]
    block = min(ALIGN_TOKENS_PER_PROGRAM, triton.next_power_of_2(numel))
    _count_kernel[(triton.cdiv(numel, block),)](topk_ids, counts, numel, BLOCK=block)
    _layout_kernel[(triton.cdiv(n_m_blocks, ALIGN_BLOCKS_PER_PROGRAM),)](
        counts, starts, sorted_ids, expert_ids, post_pad, E, n_sorted, n_m_blocks, numel,
        BLOCK_M=BLOCK_M, EXPERTS=triton.next_power_of_2(E), BLOCKS=ALIGN_BLOCKS_PER_PROGRAM)
    _scatter_kernel[(triton.cdiv(numel, block),)](topk_ids, starts, sorted_ids, numel, BLOCK=block)

    act = torch.empty((numel, I), dtype=hidden_states.dtype, device=device)
    half_n = BLOCK_N // 2
    _gate_up_silu_kernel[(n_m_blocks * triton.cdiv(I, half_n),)](
        hidden_states, w1, act, sorted_ids, expert_ids, post_pad,
        numel, top_k, H, I, n_m_blocks, hidden_states.stride(0), w1.stride(0), w1.stride(1), act.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=half_n, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=warps, num_stages=stages)
    y = torch.empty((numel, H), dtype=hidden_states.dtype, device=device)
    _down_kernel[(n_m_blocks * triton.cdiv(H, BLOCK_N),)](
        act, w2, y, topk_weights, sorted_ids, expert_ids, post_pad,
        numel, H, I, n_m_blocks, act.stride(0), w2.stride(0), w2.stride(1), y.stride(0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=warps, num_stages=stages)
    out = torch.empty((T, H), dtype=hidden_states.dtype, device=device)
    _sum_topk_kernel[(T, triton.cdiv(H, SUM_BLOCK))](y, out, top_k, H, BLOCK=SUM_BLOCK)
    return out
