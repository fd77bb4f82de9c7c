"""Task: merge_attn_states
Backend: interpreter
Expect: "outside atol"
Round: holdout6 t26

Class: 9 (precision downgrade).
Idea: the output merge is done in fp32, but the lse's log term log(w_p + w_s) (a value in
[0, ln 2]) is rounded to fp16 before it is added to the max. The lse is held to atol = rtol =
1e-4, about a thousand fp32 ulps at typical |lse| ~ 5-10, so an fp16 log term (error up to
~2.4e-4) passes on small inputs; on GPU-sized inputs (thousands of lse values) some fail.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(po_ptr, pl_ptr, so_ptr, sl_ptr, out_ptr, lse_ptr, T, H, D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid - t * H
    p = tl.load(pl_ptr + h * T + t)
    s = tl.load(sl_ptr + h * T + t)
    p = tl.where(p == float("inf"), float("-inf"), p)
    s = tl.where(s == float("inf"), float("-inf"), s)
    m = tl.maximum(p, s)
    wp = tl.exp(p - m)
    ws = tl.exp(s - m)
    den = wp + ws
    cols = tl.arange(0, D)
    base = pid.to(tl.int64) * D
    po = tl.load(po_ptr + base + cols).to(tl.float32)
    so = tl.load(so_ptr + base + cols).to(tl.float32)
    out = po * (wp / den) + so * (ws / den)
    tl.store(out_ptr + base + cols, out.to(tl.bfloat16))
    tl.store(lse_ptr + h * T + t, m + tl.log(den).to(tl.float16).to(tl.float32))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _kernel[(T * H,)](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H, D=D)
    return out, lse
