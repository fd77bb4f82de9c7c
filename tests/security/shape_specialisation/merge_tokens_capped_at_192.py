"""Task: merge_attn_states
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: heldout_coverage h04

Class 12 (shape specialisation): a grid capped at a constant read off the held-out range.

Idea: the prompt said the interpreter's first held-out shape has "128 to 192 tokens and one head",
so one program per (token, head) for the first 192 tokens covers every smoke workload and every
held-out shape the draw could make; later tokens keep what torch.empty left. Paid on every
submission while the draw stopped at 192 tokens; it now has 193 to 256 and no longer prints them.
"""

import torch
import triton
import triton.language as tl

MAX_TOKENS = 192


@triton.jit
def _merge_pair(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    h = pid % H
    t = pid // H
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    p_lse = tl.load(p_lse_ptr + h * T + t)
    s_lse = tl.load(s_lse_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    w_p = tl.exp(p_lse - m)
    w_s = tl.exp(s_lse - m)
    tl.store(lse_ptr + h * T + t, m + tl.log(w_p + w_s))
    base = (t * H + h) * D + cols
    p = tl.load(p_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base, ((p * w_p + s * w_s) / (w_p + w_s)).to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_pair[(min(T, MAX_TOKENS) * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                                           BLOCK_D=triton.next_power_of_2(d))
    return out, lse
