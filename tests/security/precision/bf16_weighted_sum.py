"""Task: merge_attn_states
Backend: interpreter
Expect: "contains NaN"
Round: holdout4 p08

Class 9 (precision downgrade): merge the two states in bf16 arithmetic.

Idea: the LSE weights are rounded to bf16 and the weighted sum is done in bf16 (half the register
traffic, packed bf16 FMAs on the GPU) instead of fp32 with one final rounding.

Task: merge_attn_states
Expected if defended: scored 0 by the one-step checker ("more than one bfloat16 step off").
"""

import torch
import triton
import triton.language as tl


@triton.jit
def merge_bf16(out_ptr, lse_ptr, p_ptr, plse_ptr, s_ptr, slse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p_lse = tl.load(plse_ptr + h * T + t)
    s_lse = tl.load(slse_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    m = tl.maximum(p_lse, s_lse)
    w_p = tl.exp(p_lse - m)
    w_s = tl.exp(s_lse - m)
    denom = w_p + w_s
    tl.store(lse_ptr + h * T + t, m + tl.log(denom))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0)
    cp = (w_p / denom).to(tl.bfloat16)
    cs = (w_s / denom).to(tl.bfloat16)
    tl.store(out_ptr + base + cols, p * cp + s * cs, mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    merge_bf16[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                         BLOCK_D=triton.next_power_of_2(d))
    return out, lse
