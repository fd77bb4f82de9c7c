"""MoE block alignment (counting sort of token slots by expert, each expert padded to whole blocks):
expert Triton reference.

Three launches, no sort and no host synchronisation:
1. count: every token slot adds one to its expert's counter (global atomics into a zeroed buffer);
2. layout: every program recomputes the exclusive scan of the padded counts from the E counters (a
   few hundred integers: cheaper than a second launch to share it), writes the expert of each of its
   blocks (-1 past the end) and the sentinel into each padding slot of its blocks; program 0 also
   writes the total and each expert's first slot;
3. scatter: every token slot claims the next free slot of its expert with an atomic add on that
   first-slot counter and writes its index there. Tokens and padding occupy disjoint slots, so the
   two writers never race. The order of an expert's tokens is whatever order the atomics grant.
"""

import torch
import triton
import triton.language as tl

# Token slots per program in the count and scatter kernels: 16 KB of int32 ids in flight per program.
TOKENS_PER_PROGRAM = 4096
# Blocks per layout program: the [blocks, experts] comparison that finds each block's expert stays
# at 8K elements for 256 experts, and 32 blocks of 16-128 slots give each program 2-16 KB to write.
BLOCKS_PER_PROGRAM = 32


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    expert = tl.load(ids_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + expert, 1, mask=mask)


@triton.jit
def _layout_kernel(counts_ptr, starts_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                   n_experts, n_sorted, n_blocks, sentinel,
                   BLOCK_SIZE: tl.constexpr, EXPERTS: tl.constexpr, BLOCKS: tl.constexpr):
    e = tl.arange(0, EXPERTS)
    e_mask = e < n_experts
    counts = tl.load(counts_ptr + e, mask=e_mask, other=0)
    padded = (counts + BLOCK_SIZE - 1) // BLOCK_SIZE * BLOCK_SIZE
    ends = tl.cumsum(padded, axis=0)
    total = tl.sum(padded, axis=0)
    if tl.program_id(0) == 0:
        tl.store(starts_ptr + e, ends - padded, mask=e_mask)
        tl.store(post_pad_ptr, total)

    b = tl.program_id(0) * BLOCKS + tl.arange(0, BLOCKS)
    b_mask = b < n_blocks
    first = b * BLOCK_SIZE
    # A block belongs to the expert after every expert whose padded range ends at or before it.
    before = (ends[None, :] <= first[:, None]) & e_mask[None, :]
    owner = tl.sum(before.to(tl.int32), axis=1)
    owner_start = tl.sum(tl.where(before, padded[None, :], 0), axis=1)
    used = first < total
    tl.store(expert_ids_ptr + b, tl.where(used, owner, -1), mask=b_mask)
    owner_count = tl.load(counts_ptr + owner, mask=b_mask & used, other=0)
    slot = first[:, None] + tl.arange(0, BLOCK_SIZE)[None, :]
    # Past the owner's tokens (or past the end: owner_count 0, owner_start the total) is padding.
    padding = slot - owner_start[:, None] >= owner_count[:, None]
    tl.store(sorted_ptr + slot, tl.full(slot.shape, sentinel, tl.int32),
             mask=b_mask[:, None] & padding & (slot < n_sorted))


@triton.jit
def _scatter_kernel(ids_ptr, starts_ptr, sorted_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    expert = tl.load(ids_ptr + offs, mask=mask, other=0)
    slot = tl.atomic_add(starts_ptr + expert, 1, mask=mask)
    tl.store(sorted_ptr + slot, offs, mask=mask)


def forward(topk_ids, num_experts, block_size):
    assert topk_ids.is_contiguous() and block_size & (block_size - 1) == 0, "contiguous ids, power-of-two blocks"
    numel = topk_ids.numel()
    n_sorted = numel + num_experts * (block_size - 1)
    n_blocks = triton.cdiv(n_sorted, block_size)
    device = topk_ids.device
    sorted_token_ids = torch.empty((n_sorted,), dtype=torch.int32, device=device)
    expert_ids = torch.empty((n_blocks,), dtype=torch.int32, device=device)
    num_tokens_post_pad = torch.empty((1,), dtype=torch.int32, device=device)
    work = torch.zeros((2 * num_experts,), dtype=torch.int32, device=device)  # counts, then first free slots
    counts, starts = work[:num_experts], work[num_experts:]
    block = min(TOKENS_PER_PROGRAM, triton.next_power_of_2(numel))
    _count_kernel[(triton.cdiv(numel, block),)](topk_ids, counts, numel, BLOCK=block)
    _layout_kernel[(triton.cdiv(n_blocks, BLOCKS_PER_PROGRAM),)](
        counts, starts, sorted_token_ids, expert_ids, num_tokens_post_pad,
        num_experts, n_sorted, n_blocks, numel,
        BLOCK_SIZE=block_size, EXPERTS=triton.next_power_of_2(num_experts), BLOCKS=BLOCKS_PER_PROGRAM)
    _scatter_kernel[(triton.cdiv(numel, block),)](topk_ids, starts, sorted_token_ids, numel, BLOCK=block)
    return sorted_token_ids, expert_ids, num_tokens_post_pad
