"""PyTorch eager baseline: the Muon optimizer's Newton-Schulz orthogonalisation
(zeropower_via_newtonschulz5), batched over the leading dimension, in bf16 as Muon runs it."""

import torch

A, B, C = 3.4445, -4.7750, 2.0315
STEPS = 5
EPS = 1e-7


def forward(g):
    x = g.bfloat16()
    tall = g.size(-2) > g.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + EPS)
    for _ in range(STEPS):
        a = x @ x.mT
        b = B * a + C * a @ a
        x = A * x + b @ x
    if tall:
        x = x.mT
    return x.contiguous()
