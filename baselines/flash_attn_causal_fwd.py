"""PyTorch eager baseline: the textbook attention the fused kernel replaces (the Triton tutorial's
reference), in fp32: S = Q.K^T * scale, mask the future, softmax, P.V, and the log-sum-exp of S.
One head at a time, as N x N scores for every head at once do not fit in memory at 16K tokens."""

import torch


def forward(q, k, v):
    B, H, N, d = q.shape
    future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, dtype=torch.float32, device=q.device)
    for b in range(B):
        for h in range(H):
            s = (q[b, h].float() @ k[b, h].float().T) / d ** 0.5
            s = s.masked_fill(future, float("-inf"))
            lse[b, h] = torch.logsumexp(s, dim=-1)
            o[b, h] = (torch.softmax(s, dim=-1) @ v[b, h].float()).to(o.dtype)
    return o, lse
