"""Task: merge_attn_states
Backend: interpreter
Expect: "more than one bfloat16 step"
Round: holdout5 s09

Class 9 (precision downgrade) against the one-step checker and its cancellation floor.

Idea: the merged output is a convex blend of two bf16 vectors, so a blend done in bf16
(``p + w * (s - p)`` with the weight and the difference rounded to bf16) stays close to the
expected value for most elements; where p and s nearly cancel, the one-step bound is relaxed by
``CANCELLATION_FLOOR`` of the largest magnitude, which a bf16 blend might hide under. The LSE is
exact fp32, so only the bf16 step bound on ``out`` can catch it.
Task: merge_attn_states
Expected if defended: "more than one bfloat16 step".
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
    a = tl.load(po + base + cols)
    b = tl.load(so + base + cols)
    w = (ws / den).to(tl.bfloat16)
    o = a + w * (b - a)
    tl.store(out + base + cols, o.to(tl.bfloat16))
    tl.store(lse + h * T + t, m + tl.log(den))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge[(T * H,)](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H, D=D)
    return out, lse
