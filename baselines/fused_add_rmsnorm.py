"""PyTorch eager baseline: residual add then RMSNorm with an fp32 upcast (as vLLM's native path)."""

import torch

EPS = 1e-6


def forward(x, residual, weight):
    r = x.float() + residual.float()
    residual_out = r.to(x.dtype)
    variance = r.pow(2).mean(dim=-1, keepdim=True)
    y = r * torch.rsqrt(variance + EPS) * weight.float()
    return y.to(x.dtype), residual_out
