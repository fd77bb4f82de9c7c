"""PyTorch eager baseline, as vLLM's AWQ fallback computes it: unpack the int4 weights and zeros (AWQ's
nibble order), subtract the zeros, scale by group in fp16, then an fp16 matmul."""

import torch

GROUP = 128
# Column 8j + c of a packed int32 lives in nibble AWQ_NIBBLE[c] (bits 4 * AWQ_NIBBLE[c] and up).
AWQ_NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)


def unpack(packed):
    shifts = torch.tensor(AWQ_NIBBLE, device=packed.device, dtype=torch.int32) * 4
    nibbles = (packed.unsqueeze(-1) >> shifts) & 0xF
    return nibbles.view(packed.shape[0], -1)


def forward(x, qweight, qzeros, scales):
    w = unpack(qweight)  # [K, N]
    z = unpack(qzeros).repeat_interleave(GROUP, dim=0)  # [K, N]
    w = (w - z).to(torch.float16) * scales.repeat_interleave(GROUP, dim=0)
    return torch.matmul(x, w)
