"""PyTorch eager baseline: per sequence, prepend its conv state (or zeros), a depthwise F.conv1d, SiLU, and
the new state from the last inputs (vLLM's reference path, sequence by sequence)."""

import torch
from torch.nn import functional as F


def forward(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state):
    dim, width = weight.shape
    out = torch.zeros_like(x)
    new_states = conv_states.clone()
    bounds, slots, init = query_start_loc.tolist(), cache_indices.tolist(), has_initial_state.tolist()
    for b, slot in enumerate(slots):
        if slot < 0:  # a padding sequence
            continue
        seq = x[bounds[b]:bounds[b + 1]].T.float()                          # [dim, L]
        history = conv_states[slot].float() if init[b] else seq.new_zeros(dim, width - 1)
        xx = torch.cat([history, seq], dim=1)                               # [dim, width - 1 + L]
        y = F.conv1d(xx[None], weight.float()[:, None, :], bias.float(), groups=dim)[0]
        out[bounds[b]:bounds[b + 1]] = F.silu(y).T.to(x.dtype)
        new_states[slot] = xx[:, -(width - 1):].to(conv_states.dtype)
    return out, new_states
