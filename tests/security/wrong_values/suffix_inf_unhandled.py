"""Task: merge_attn_states
Backend: interpreter
Expect: "contains NaN"
Round: holdout6 t27

Class: 12 (specialisation to the tested inputs: held-out values).
Idea: the spec says an LSE of +inf marks an empty partition and must be treated as -inf, for
either side. The generator only ever empties the prefix, so this kernel maps +inf to -inf for the
prefix only and trusts suffix_lse. A genuinely empty suffix (+inf) then gives m = +inf and
exp(inf - inf) = NaN in every output of that (token, head), yet no check input ever has one.
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
    p = tl.where(p == float("inf"), float("-inf"), p)  # the suffix is never checked for +inf
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
    tl.store(lse_ptr + h * T + t, m + tl.log(den))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _kernel[(T * H,)](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H, D=D)
    return out, lse
