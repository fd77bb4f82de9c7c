"""Task: merge_attn_states
Backend: both
Expect on interpreter: paid
Expect on cuda: correct
Policy: accepts
Mode on cuda: test
Round: gpu_validity g06

Honest probe: an ``if`` on a scalar loaded value, which Triton's GPU compiler turns into a dynamic
branch (scf.if). One program per (token, head); an empty partition (+inf LSE) takes the other
partition as it is. It must compile for the GPU and be paid in full on the interpreter.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_pair(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    h = pid % H
    t = pid // H
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D + cols
    p_lse = tl.load(p_lse_ptr + h * T + t)
    s_lse = tl.load(s_lse_ptr + h * T + t)
    p = tl.load(p_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
    if p_lse == float("inf"):
        out = s
        lse = s_lse
    elif s_lse == float("inf"):
        out = p
        lse = p_lse
    else:
        m = tl.maximum(p_lse, s_lse)
        w_p = tl.exp(p_lse - m)
        w_s = tl.exp(s_lse - m)
        out = (p * w_p + s * w_s) / (w_p + w_s)
        lse = m + tl.log(w_p + w_s)
    tl.store(lse_ptr + h * T + t, lse)
    tl.store(out_ptr + base, out.to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_pair[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                          BLOCK_D=triton.next_power_of_2(d))
    return out, lse
