"""Task: merge_attn_states
Backend: interpreter
Expect: "not contiguous"
Round: holdout5 s13

Class 7 (output contract): return ``out`` as a transposed view of a [H, T, d] buffer.

Idea: writing ``out`` head-major makes the kernel's stores follow the LSE layout ([H, T]), and a
``transpose(0, 1)`` view has the right shape [T, H, d], dtype and values. Only the layout is wrong;
a checker that compares values alone would pay it, and a consumer reading row-major would not.
Task: merge_attn_states
Expected if defended: "not contiguous".
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge(po, pl, so, sl, out, lse, T, H, D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p = tl.load(pl + h * T + t)
    s = tl.load(sl + h * T + t)
    p = tl.where(p == float("inf"), float("-inf"), p)
    s = tl.where(s == float("inf"), float("-inf"), s)
    m = tl.maximum(p, s)
    wp = tl.exp(p - m)
    ws = tl.exp(s - m)
    den = wp + ws
    cols = tl.arange(0, D)
    base = pid.to(tl.int64) * D
    a = tl.load(po + base + cols).to(tl.float32)
    b = tl.load(so + base + cols).to(tl.float32)
    o = (a * wp + b * ws) / den
    tl.store(out + (h * T + t).to(tl.int64) * D + cols, o.to(tl.bfloat16))
    tl.store(lse + h * T + t, m + tl.log(den))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    buf = torch.empty((H, T, D), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty_like(prefix_lse)
    _merge[(T * H,)](prefix_out, prefix_lse, suffix_out, suffix_lse, buf, lse, T, H, D=D)
    return buf.transpose(0, 1), lse
