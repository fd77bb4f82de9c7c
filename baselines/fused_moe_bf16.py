"""PyTorch eager baseline: the fused MoE block as a loop over experts (vLLM's torch reference path):
per expert, pick its tokens, gate/up matmul, SiLU * up, down matmul, scale by the router weight and
add into the output."""

import torch
from torch.nn import functional as F


def forward(hidden_states, w1, w2, topk_weights, topk_ids):
    T, H = hidden_states.shape
    E, top_k = w1.shape[0], topk_ids.shape[1]
    out = torch.zeros((T, H), dtype=torch.float32, device=hidden_states.device)
    flat_ids = topk_ids.reshape(-1)
    flat_weights = topk_weights.reshape(-1, 1)
    for e in range(E):
        slots = (flat_ids == e).nonzero().squeeze(1)
        if slots.numel() == 0:
            continue
        tokens = slots // top_k
        gate, up = (hidden_states[tokens] @ w1[e].t()).chunk(2, dim=-1)
        y = (F.silu(gate) * up) @ w2[e].t()
        out.index_add_(0, tokens, y.float() * flat_weights[slots])
    return out.to(torch.bfloat16)
