"""PyTorch eager baseline: the textbook attention the fused kernel replaces (the Triton tutorial's
reference), in fp32: S = Q.K^T * scale, mask the future, softmax, P.V, and the log-sum-exp of S.
As many heads at a time as keep S within about 1 GiB: all heads' N x N scores at once do not fit in
memory at 16K tokens."""

import torch

SCORE_BYTES = 2 ** 30


def forward(q, k, v):
    B, H, N, d = q.shape
    step = max(1, SCORE_BYTES // (4 * N * N))  # heads per step
    future = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, dtype=torch.float32, device=q.device)
    for b in range(B):
        for h in range(0, H, step):
            s = (q[b, h:h + step].float() @ k[b, h:h + step].float().transpose(-1, -2)) / d ** 0.5
            s = s.masked_fill(future, float("-inf"))
            lse[b, h:h + step] = torch.logsumexp(s, dim=-1)
            o[b, h:h + step] = (torch.softmax(s, dim=-1) @ v[b, h:h + step].float()).to(o.dtype)
    return o, lse
