"""PyTorch eager baseline, as Punica's reference path computes it: per adapter, gather its tokens, shrink
(x A^T), expand (h B^T) times the adapter's scale, and index_add the result into the base output."""

import torch


def forward(x, base, lora_a, lora_b, scales, token_lora, sorted_tokens, lora_start):
    slices, adapters = lora_a.shape[:2]
    width = lora_b.shape[2]
    y = base.clone()
    for s in range(slices):
        out = y[:, s * width:(s + 1) * width]  # a view: index_add_ writes through to y
        for lora in range(adapters):
            idx = (token_lora == lora).nonzero().squeeze(1)
            if idx.numel() == 0:
                continue
            h = x.index_select(0, idx) @ lora_a[s, lora].t()
            out.index_add_(0, idx, (h @ lora_b[s, lora].t()) * scales[lora])
    return y
