"""PyTorch eager baseline: the chunked gated delta rule's forward from its WY terms, one 64-token chunk
at a time per sequence (matmuls over all value heads at once), as flash-linear-attention's reference
path computes it: the state is carried across chunks in fp32, each chunk's output is its inter-chunk
part (queries against the state) plus its causal intra-chunk part."""

import torch

CHUNK = 64


def forward(q, k, w, u, g, initial_state, cu_seqlens):
    T, H, K = q.shape
    HV, V = u.shape[1], u.shape[2]
    group, scale = HV // H, K ** -0.5
    qf = q.float().repeat_interleave(group, dim=1).transpose(0, 1)   # [HV, T, K]
    kf = k.float().repeat_interleave(group, dim=1).transpose(0, 1)
    wf, uf, gf = w.float().transpose(0, 1), u.float().transpose(0, 1), g.t()
    o = torch.empty(HV, T, V, dtype=torch.float32, device=q.device)
    final = torch.empty_like(initial_state)
    bounds = cu_seqlens.tolist()
    for n in range(len(bounds) - 1):
        S = initial_state[n]                                            # [HV, K, V] fp32
        for s in range(bounds[n], bounds[n + 1], CHUNK):
            e = min(s + CHUNK, bounds[n + 1])
            qc, kc, gc = qf[:, s:e], kf[:, s:e], gf[:, s:e]
            v_new = uf[:, s:e] - wf[:, s:e] @ S                          # the chunk's delta-rule values
            causal = torch.ones(e - s, e - s, dtype=torch.bool, device=q.device).tril()
            decay = torch.exp((gc[:, :, None] - gc[:, None, :]).masked_fill(~causal, float("-inf")))
            o[:, s:e] = scale * ((qc @ S) * torch.exp(gc)[..., None] + ((qc @ kc.transpose(1, 2)) * decay) @ v_new)
            last = gc[:, -1:]
            S = S * torch.exp(last)[..., None] + (kc * torch.exp(last - gc)[..., None]).transpose(1, 2) @ v_new
        final[n] = S
    return o.transpose(0, 1).to(q.dtype), final
