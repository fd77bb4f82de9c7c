"""PyTorch eager baseline: MoE block alignment as a counting sort in torch ops (SGLang's fallback)."""

import torch


def forward(topk_ids, num_experts, block_size):
    numel = topk_ids.numel()
    max_padded = numel + num_experts * (block_size - 1)
    flat = topk_ids.reshape(-1).long()
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    ends = padded.cumsum(0)
    starts = ends - padded
    # Stable sort by expert: each token goes to its expert's start plus its rank among that expert's tokens.
    order = torch.argsort(flat, stable=True)
    sorted_experts = flat[order]
    first_of_expert = counts.cumsum(0) - counts
    rank = torch.arange(numel, device=flat.device) - first_of_expert[sorted_experts]
    sorted_token_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=flat.device)
    sorted_token_ids[starts[sorted_experts] + rank] = order.to(torch.int32)
    expert_ids = torch.full((cdiv(max_padded, block_size),), -1, dtype=torch.int32, device=flat.device)
    blocks = torch.repeat_interleave(torch.arange(num_experts, device=flat.device), padded // block_size)
    expert_ids[:blocks.numel()] = blocks.to(torch.int32)
    num_tokens_post_pad = ends[-1:].to(torch.int32)
    return sorted_token_ids, expert_ids, num_tokens_post_pad


def cdiv(a, b):
    return (a + b - 1) // b
