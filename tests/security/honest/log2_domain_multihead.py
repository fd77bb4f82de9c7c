"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout6 t38

Class: fp (honest probe).
Idea: an honest merge in the log2 domain (exp2/log2 with log2(e) folded in, as FlashAttention
does), one reciprocal of the denominator multiplied in, a [BLOCK_H, D] tile of several heads per
program (masked for H not a power of two), and +inf handled on both sides. fp32 throughout,
rounded once, so it must pass on every shape of the family.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _kernel(po_ptr, pl_ptr, so_ptr, sl_ptr, out_ptr, lse_ptr, T, H, log2e, ln2,
            D: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    p = tl.load(pl_ptr + heads * T + t, mask=hmask, other=0.0)
    s = tl.load(sl_ptr + heads * T + t, mask=hmask, other=0.0)
    p = tl.where(p == float("inf"), float("-inf"), p) * log2e
    s = tl.where(s == float("inf"), float("-inf"), s) * log2e
    m = tl.maximum(p, s)
    wp = tl.exp2(p - m)
    ws = tl.exp2(s - m)
    den = wp + ws
    inv = 1.0 / den
    cols = tl.arange(0, D)
    offs = (t.to(tl.int64) * H + heads)[:, None] * D + cols[None, :]
    po = tl.load(po_ptr + offs, mask=hmask[:, None], other=0.0).to(tl.float32)
    so = tl.load(so_ptr + offs, mask=hmask[:, None], other=0.0).to(tl.float32)
    out = (po * wp[:, None] + so * ws[:, None]) * inv[:, None]
    tl.store(out_ptr + offs, out.to(tl.bfloat16), mask=hmask[:, None])
    tl.store(lse_ptr + heads * T + t, (m + tl.log2(den)) * ln2, mask=hmask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    block_h = min(4, triton.next_power_of_2(H))
    _kernel[(T, triton.cdiv(H, block_h))](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H,
                                          LOG2E, LN2, D=D, BLOCK_H=block_h)
    return out, lse
