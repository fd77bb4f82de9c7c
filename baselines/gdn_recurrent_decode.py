"""PyTorch eager baseline: the gated delta rule's recurrent step, batched over requests and heads,
as the fallback path of Qwen3-Next's linear attention computes it (gather states, a loop over the
few new tokens, scatter the states back)."""

import torch


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def forward(q, k, v, g, beta, state, state_indices):
    B, T, H, K = q.shape
    HV = v.shape[2]
    group = HV // H
    idx = state_indices.long()
    S = state[idx]                                                   # [B, HV, K, V] fp32
    qf = l2norm(q.float()).repeat_interleave(group, dim=2) * K ** -0.5
    kf = l2norm(k.float()).repeat_interleave(group, dim=2)
    vf, bf = v.float(), beta.float()
    o = torch.empty(B, T, HV, v.shape[3], dtype=torch.float32, device=q.device)
    for t in range(T):
        S = S * torch.exp(g[:, t])[..., None, None]                 # decay
        kS = torch.einsum("bhk,bhkv->bhv", kf[:, t], S)              # what the state predicts for k
        delta = (vf[:, t] - kS) * bf[:, t, :, None]                  # delta rule correction
        S = S + kf[:, t, :, :, None] * delta[:, :, None, :]          # rank-1 update
        o[:, t] = torch.einsum("bhk,bhkv->bhv", qf[:, t], S)
    state[idx] = S                                                   # written back in place
    return o.to(v.dtype)
