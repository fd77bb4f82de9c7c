"""PyTorch eager baseline: gather the chunks, A by a batched matmul and tril, then a batched unitriangular
solve against the identity (flash-linear-attention's naive path), scattered back."""

import torch

CHUNK = 64


def forward(k, beta, g, cu_seqlens):
    T, H = k.shape[1], k.shape[2]
    bounds = cu_seqlens.tolist()
    starts = [t0 for s in range(len(bounds) - 1) for t0 in range(bounds[s], bounds[s + 1], CHUNK)]
    ends = [min(t0 + CHUNK, next(b for b in bounds if b > t0)) for t0 in starts]
    rows = torch.tensor(starts, device=k.device)[:, None] + torch.arange(CHUNK, device=k.device)
    valid = rows < torch.tensor(ends, device=k.device)[:, None]                     # [C, n]
    idx = torch.where(valid, rows, 0)
    kc = (k[0].float()[idx] * valid[..., None, None]).transpose(1, 2)             # [C, H, n, D]
    bc = (beta[0].float()[idx] * valid[..., None]).transpose(1, 2)                # [C, H, n]
    gc = (g[0][idx] * valid[..., None]).transpose(1, 2)
    A = (kc * bc[..., None]) @ kc.transpose(-1, -2)
    A = (A * torch.exp(gc[..., :, None] - gc[..., None, :])).tril(-1)
    eye = torch.eye(CHUNK, device=k.device)
    Ai = torch.linalg.solve_triangular(A + eye, eye.expand_as(A), upper=False, unitriangular=True)
    Ai = Ai * valid[:, None, None, :]                                              # columns past a chunk's end
    out = torch.zeros(T, H, CHUNK, device=k.device)
    out[rows[valid]] = Ai.transpose(1, 2)[valid]
    return out[None]
