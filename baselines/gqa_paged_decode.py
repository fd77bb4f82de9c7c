"""PyTorch eager baseline: SGLang's per-request fallback. For each request, gather its K/V rows by
slot index, repeat each KV head for its q heads, then scores, an fp32 softmax and the weighted sum."""

import torch


def forward(q, k_buffer, v_buffer, kv_indptr, kv_indices):
    B, Hq, d = q.shape
    group = Hq // k_buffer.shape[1]
    o = torch.empty_like(q)
    bounds = kv_indptr.tolist()
    for b in range(B):
        idx = kv_indices[bounds[b]:bounds[b + 1]]
        k = k_buffer.index_select(0, idx).repeat_interleave(group, dim=1).float()  # [n, Hq, d]
        v = v_buffer.index_select(0, idx).repeat_interleave(group, dim=1).float()
        scores = torch.einsum("hd,nhd->hn", q[b].float(), k) / d ** 0.5
        p = torch.softmax(scores, dim=-1)
        o[b] = torch.einsum("hn,nhd->hd", p, v).to(o.dtype)
    return o
