"""PyTorch eager baseline: the chunked gated delta rule's forward from its WY terms, one 64-token chunk
at a time per sequence (matmuls over all value heads at once), as flash-linear-attention's reference
path computes it: the state is carried across chunks in fp32, each chunk's output is its inter-chunk
part (queries against the state) plus its causal intra-chunk part."""

import torch

CHUNK = 64


def chunk_step(S, qc, kc, wc, uc, gc, scale):
    """One chunk for every value head: its outputs, and the state carried to its end."""
    v_new = uc - wc @ S                                                  # the chunk's delta-rule values
    n = qc.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool, device=qc.device).tril()
    decay = torch.exp((gc[:, :, None] - gc[:, None, :]).masked_fill(~causal, float("-inf")))
    o = scale * ((qc @ S) * torch.exp(gc)[..., None] + ((qc @ kc.transpose(1, 2)) * decay) @ v_new)
    last = gc[:, -1:]
    return o, S * torch.exp(last)[..., None] + (kc * torch.exp(last - gc)[..., None]).transpose(1, 2) @ v_new


def forward(q, k, w, u, g, initial_state, cu_seqlens):
    T, H, K = q.shape
    HV, V = u.shape[1], u.shape[2]
    group = HV // H
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
            o[:, s:e], S = chunk_step(S, qf[:, s:e], kf[:, s:e], wf[:, s:e], uf[:, s:e], gf[:, s:e], K ** -0.5)
        final[n] = S
    return o.transpose(0, 1).to(q.dtype), final
