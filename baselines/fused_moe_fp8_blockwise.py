"""PyTorch eager baseline: the first grouped GEMM of a block-fp8 MoE as vLLM's torch reference computes
it: per expert, dequantise its weights and its tokens' activations with their block scales
(repeat_interleave to full size, fp32), matmul, round to bf16, one row per (token, expert) slot."""

import torch

BLOCK = 128


def forward(a_q, a_scale, w_q, w_scale, topk_ids):
    T, K = a_q.shape
    E, N, _ = w_q.shape
    top_k = topk_ids.shape[1]
    a = a_q.float() * a_scale.repeat_interleave(BLOCK, dim=1)
    out = torch.empty((T * top_k, N), dtype=torch.bfloat16, device=a_q.device)
    flat_ids = topk_ids.reshape(-1)
    for e in range(E):
        slots = (flat_ids == e).nonzero().squeeze(1)
        if slots.numel() == 0:
            continue
        w = w_q[e].float() * w_scale[e].repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
        out[slots] = (a[slots // top_k] @ w.t()).to(torch.bfloat16)
    return out.view(T, top_k, N)
