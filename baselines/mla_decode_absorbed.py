"""PyTorch eager baseline: SGLang's per-request fallback for absorbed MLA. For each request, gather its
cache rows by slot index, concatenate the query's latent and rotary parts, then scores over the full
576-wide rows, an fp32 softmax, and the weighted sum of the rows' first 512 columns (the value)."""

import torch

LATENT = 512
SCALE = (128 + 64) ** -0.5


def forward(q_nope, q_pe, kv_buffer, kv_indptr, kv_indices):
    B, H, _ = q_nope.shape
    q = torch.cat([q_nope, q_pe], dim=-1)  # [B, H, 576]
    o = torch.empty_like(q_nope)
    bounds = kv_indptr.tolist()
    for b in range(B):
        rows = kv_buffer.index_select(0, kv_indices[bounds[b]:bounds[b + 1]]).float()  # [n, 576]
        p = torch.softmax(q[b].float() @ rows.T * SCALE, dim=-1)
        o[b] = (p @ rows[:, :LATENT]).to(o.dtype)
    return o
