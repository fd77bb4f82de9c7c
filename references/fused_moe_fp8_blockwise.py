"""First grouped GEMM of a block-fp8 MoE (w8a8, 1x128 activation and 128x128 weight scales): expert
Triton reference.

The token slots are counting-sorted by expert into runs padded to whole BLOCK_M blocks (three small
kernels, no host sync), so every M block belongs to one expert. Each GEMM program gathers BLOCK_M
activation rows by slot, and for every 128-wide K block (BLOCK_K = the quantisation group) runs one
fp8 tensor-core dot, promotes its result to the fp32 accumulator scaled by the outer product of the
rows' activation scales and the columns' weight scales. The weights are never dequantised: fp8
bytes stream from HBM to the tensor cores, and the scales cost one multiply-add per output per K block.
"""

import torch
import triton
import triton.language as tl

BLOCK_K = 128  # the quantisation group: one scale per row (activations) and per 128 columns (weights)
# Tiles per regime of slots per expert (T * k / E), sm_90. Decode streams 1 byte per weight: 16-row
# tiles waste little on padding. Prefill with thousands of slots per expert is compute-bound:
# 128x128 fp8 tiles at 8 warps, 4 stages of 32 KB (A and B tiles) in shared memory.
# (BLOCK_M, BLOCK_N, num_warps, num_stages)
DECODE = (16, 64, 4, 4)
MID = (64, 128, 4, 4)
PREFILL = (128, 128, 8, 4)
DECODE_SLOTS_PER_EXPERT = 32
MID_SLOTS_PER_EXPERT = 256
GROUP_M = 8
ALIGN_TOKENS_PER_PROGRAM = 4096
ALIGN_BLOCKS_PER_PROGRAM = 32


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
def _block_fp8_moe_gemm_kernel(a_ptr, as_ptr, w_ptr, ws_ptr, out_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                               numel, top_k, N, K, n_m_blocks, stride_am, stride_asm, stride_we, stride_wn,
                               stride_wse, stride_wsn, stride_om,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                               GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    n_n_blocks = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * n_n_blocks
    first_m = (pid // per_group) * GROUP_M
    size = tl.minimum(n_m_blocks - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size
    pid_n = (pid % per_group) // size
    if pid_m * BLOCK_M >= tl.load(post_pad_ptr):
        return
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = slots < numel
    tokens = (slots // top_k).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + tokens[:, None] * stride_am + k[None, :]
    w_ptrs = w_ptr + expert * stride_we + n[None, :].to(tl.int64) * stride_wn + k[:, None]
    as_ptrs = as_ptr + tokens * stride_asm
    ws_ptrs = ws_ptr + expert * stride_wse + (n // BLOCK_K) * stride_wsn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k_ok = k < K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        a_s = tl.load(as_ptrs + kb, mask=row_ok, other=0.0)
        w_s = tl.load(ws_ptrs + kb, mask=n_ok, other=0.0)
        # One K block on the fp8 tensor cores, promoted to fp32 with its scales before the next.
        acc += tl.dot(a, w) * a_s[:, None] * w_s[None, :]
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    out_ptrs = out_ptr + slots[:, None].to(tl.int64) * stride_om + n[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


def tiles(T, E, top_k):
    """The tile regime for T tokens routed to top_k of E experts (from shapes alone)."""
    per_expert = T * top_k / E
    if per_expert <= DECODE_SLOTS_PER_EXPERT:
        return DECODE
    return MID if per_expert <= MID_SLOTS_PER_EXPERT else PREFILL


def forward(a_q, a_scale, w_q, w_scale, topk_ids):
    T, K = a_q.shape
    E, N, _ = w_q.shape
    top_k = topk_ids.shape[1]
    assert a_q.stride(1) == 1 and w_q.stride(2) == 1 and a_scale.stride(1) == 1 and w_scale.stride(2) == 1
    assert topk_ids.is_contiguous()
    device = a_q.device
    BLOCK_M, BLOCK_N, warps, stages = tiles(T, E, top_k)

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

    out = torch.empty((T, top_k, N), dtype=torch.bfloat16, device=device)
    _block_fp8_moe_gemm_kernel[(n_m_blocks * triton.cdiv(N, BLOCK_N),)](
        a_q, a_scale, w_q, w_scale, out, sorted_ids, expert_ids, post_pad,
        numel, top_k, N, K, n_m_blocks, a_q.stride(0), a_scale.stride(0), w_q.stride(0), w_q.stride(1),
        w_scale.stride(0), w_scale.stride(1), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=warps, num_stages=stages)
    return out
