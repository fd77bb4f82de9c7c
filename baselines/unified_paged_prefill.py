"""PyTorch eager baseline: per sequence, gather its K/V pages through the block table, mask causally
with the context offset, and run scaled_dot_product_attention (in fp32, GQA heads shared), as a
paged-attention reference path does."""

import torch


def attend(qi, k, v, ctx):
    """One sequence: its new queries [Hq, q_len, d] on its keys and values [Hkv, seq_len, d], fp32."""
    pos = torch.arange(qi.shape[1], device=qi.device)[:, None] + ctx
    mask = torch.arange(k.shape[1], device=qi.device)[None, :] <= pos           # causal, offset by the context
    return torch.nn.functional.scaled_dot_product_attention(qi, k, v, attn_mask=mask, enable_gqa=True)


def forward(q, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens):
    _, page, Hkv, d = k_cache.shape
    out = torch.empty_like(q)
    starts, lens = cu_seqlens_q.tolist(), seq_lens.tolist()
    for i, seq_len in enumerate(lens):
        q_start, q_end = starts[i], starts[i + 1]
        pages = block_table[i, : (seq_len + page - 1) // page].long()
        k = k_cache[pages].reshape(-1, Hkv, d)[:seq_len].float().transpose(0, 1)   # [Hkv, seq_len, d]
        v = v_cache[pages].reshape(-1, Hkv, d)[:seq_len].float().transpose(0, 1)
        qi = q[q_start:q_end].float().transpose(0, 1)                             # [Hq, q_len, d]
        o = attend(qi, k, v, seq_len - (q_end - q_start))                          # ctx: cached tokens before
        out[q_start:q_end] = o.transpose(0, 1).to(q.dtype)
    return out
