"""Task: merge_attn_states
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: row_truncation r02

Class: 12 (shape specialisation) - handling only the first tokens.
Idea: one program per (token, head) for the first 40 tokens only: right on every published CPU
workload (37 tokens at most) and on the interpreter's held-out shapes while they had 40 tokens at
most; later tokens are left as torch.empty made them. The interpreter's first held-out shape now has
128 to 192 tokens.
"""

import torch
import triton
import triton.language as tl

MAX_TOKENS = 40


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
