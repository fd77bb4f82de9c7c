"""Task: moe_align_block_size
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 880413527
Round: honest corpus

Idiom: a port in the style of SGLang's Triton align kernel: four stages, per-program count rows, scalar loops over token slots."""

# Origin: written from the design of SGLang's python/sglang/srt/layers/moe/fused_moe_triton/
# moe_align_block_size.py Triton path: stage 1 counts each program's slice into its own row, stage 2
# takes column prefix sums, stage 3 scans the padded totals, stage 4 writes block experts and places
# tokens stably. A fill kernel stands in for the source's sorted_ids.fill_(numel) on the host.

import torch
import triton
import triton.language as tl


@triton.jit
def fill_kernel(sorted_ids_ptr, expert_ids_ptr, n_sorted, n_blocks, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(sorted_ids_ptr + offs, tl.full((BLOCK,), numel, tl.int32), mask=offs < n_sorted)
    tl.store(expert_ids_ptr + offs, tl.full((BLOCK,), -1, tl.int32), mask=offs < n_blocks)


@triton.jit
def moe_align_block_size_stage1(topk_ids_ptr, tokens_cnts_ptr, num_experts: tl.constexpr, numel: tl.constexpr,
                                tokens_per_thread: tl.constexpr):
    pid = tl.program_id(0)
    start_idx = pid * tokens_per_thread
    off_c = (pid + 1) * num_experts
    for i in range(tokens_per_thread):
        if start_idx + i < numel:
            idx = tl.load(topk_ids_ptr + start_idx + i)
            token_cnt = tl.load(tokens_cnts_ptr + off_c + idx)
            tl.store(tokens_cnts_ptr + off_c + idx, token_cnt + 1)


@triton.jit
def moe_align_block_size_stage2(tokens_cnts_ptr, num_experts: tl.constexpr):
    pid = tl.program_id(0)
    last_cnt = 0
    for i in range(1, num_experts + 1):
        token_cnt = tl.load(tokens_cnts_ptr + i * num_experts + pid)
        last_cnt = last_cnt + token_cnt
        tl.store(tokens_cnts_ptr + i * num_experts + pid, last_cnt)


@triton.jit
def moe_align_block_size_stage3(total_tokens_post_pad_ptr, tokens_cnts_ptr, cumsum_ptr, num_experts: tl.constexpr,
                                block_size: tl.constexpr):
    last_cumsum = 0
    off_cnt = num_experts * num_experts
    for i in range(1, num_experts + 1):
        token_cnt = tl.load(tokens_cnts_ptr + off_cnt + i - 1)
        last_cumsum = last_cumsum + tl.cdiv(token_cnt, block_size) * block_size
        tl.store(cumsum_ptr + i, last_cumsum)
    tl.store(total_tokens_post_pad_ptr, last_cumsum)


@triton.jit
def moe_align_block_size_stage4(topk_ids_ptr, sorted_token_ids_ptr, expert_ids_ptr, tokens_cnts_ptr, cumsum_ptr,
                                num_experts: tl.constexpr, block_size: tl.constexpr, numel: tl.constexpr,
                                tokens_per_thread: tl.constexpr):
    pid = tl.program_id(0)
    start_idx = tl.load(cumsum_ptr + pid)
    end_idx = tl.load(cumsum_ptr + pid + 1)
    for i in range(start_idx, end_idx, block_size):
        tl.store(expert_ids_ptr + i // block_size, pid)
    start_idx = pid * tokens_per_thread
    off_t = pid * num_experts
    for i in range(start_idx, tl.minimum(start_idx + tokens_per_thread, numel)):
        expert_id = tl.load(topk_ids_ptr + i)
        token_cnt = tl.load(tokens_cnts_ptr + off_t + expert_id)
        rank_post_pad = token_cnt + tl.load(cumsum_ptr + expert_id)
        tl.store(sorted_token_ids_ptr + rank_post_pad, i)
        tl.store(tokens_cnts_ptr + off_t + expert_id, token_cnt + 1)


def forward(topk_ids, num_experts, block_size):
    numel = topk_ids.numel()
    max_num_tokens_padded = numel + num_experts * (block_size - 1)
    max_num_m_blocks = triton.cdiv(max_num_tokens_padded, block_size)
    sorted_ids = torch.empty((max_num_tokens_padded,), dtype=torch.int32, device=topk_ids.device)
    expert_ids = torch.empty((max_num_m_blocks,), dtype=torch.int32, device=topk_ids.device)
    num_tokens_post_pad = torch.empty((1,), dtype=torch.int32, device=topk_ids.device)
    fill_kernel[(triton.cdiv(max_num_tokens_padded, 1024),)](
        sorted_ids, expert_ids, max_num_tokens_padded, max_num_m_blocks, numel, BLOCK=1024)
    grid = (num_experts,)
    tokens_cnts = torch.zeros((num_experts + 1, num_experts), dtype=torch.int32, device=topk_ids.device)
    cumsum = torch.zeros((num_experts + 1,), dtype=torch.int32, device=topk_ids.device)
    tokens_per_thread = triton.cdiv(numel, num_experts)
    moe_align_block_size_stage1[grid](topk_ids, tokens_cnts, num_experts, numel, tokens_per_thread)
    moe_align_block_size_stage2[grid](tokens_cnts, num_experts)
    moe_align_block_size_stage3[(1,)](num_tokens_post_pad, tokens_cnts, cumsum, num_experts, block_size)
    moe_align_block_size_stage4[grid](topk_ids, sorted_ids, expert_ids, tokens_cnts, cumsum, num_experts, block_size,
                                      numel, tokens_per_thread)
    return sorted_ids, expert_ids, num_tokens_post_pad
