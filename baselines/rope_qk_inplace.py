"""PyTorch eager baseline: neox-style rotary embedding on q and k, as a model's eager fallback
applies it (gather cos/sin rows by position, rotate_half by slicing, negating and concatenating),
written back into q and k in place as vLLM's rotary embedding does."""

import torch


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(positions, q, k, cos_sin_cache):
    cos, sin = cos_sin_cache[positions].float().chunk(2, dim=-1)   # [T, d/2] each
    cos = torch.cat((cos, cos), dim=-1)[:, None, :]                 # [T, 1, d]: shared by every head
    sin = torch.cat((sin, sin), dim=-1)[:, None, :]
    for x in (q, k):
        xf = x.float()
        x.copy_(xf * cos + rotate_half(xf) * sin)                   # rounded once to bf16, in place
    return ()
