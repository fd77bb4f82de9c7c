"""PyTorch eager baseline: expand the 1x128 and 128x128 scales, dequantise both operands, matmul in fp32."""

import torch

BLOCK = 128


def forward(a, a_scales, b, b_scales):
    M, K = a.shape
    N = b.shape[0]
    a_deq = a.float() * a_scales.repeat_interleave(BLOCK, dim=1)
    b_deq = b.float() * b_scales.repeat_interleave(BLOCK, dim=0)[:N].repeat_interleave(BLOCK, dim=1)
    return (a_deq @ b_deq.t()).to(torch.bfloat16)
