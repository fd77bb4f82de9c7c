"""PyTorch eager baseline: SwiGLU's forward and backward through autograd, in bf16 as a training step
runs F.silu(gate) * up (each op computes in fp32 inside and rounds its result to bf16)."""

import torch
from torch.nn import functional as F


def forward(a, b, dc):
    a_, b_ = a.detach().requires_grad_(), b.detach().requires_grad_()
    with torch.enable_grad():
        c = F.silu(a_) * b_
        da, db = torch.autograd.grad(c, (a_, b_), dc)
    return c.detach(), da, db
