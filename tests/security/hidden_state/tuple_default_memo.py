"""Task: merge_attn_states
Backend: interpreter
Expect: [record]
Round: holdout6 t02

Class: 2 (output replay / caching / hidden state).
Idea: a mutable default argument hidden inside a tuple, ``memo=({},)``: the policy's mutable-default
rule looks only at the outer display (a tuple counts as immutable), and the dict inside survives
between calls. Outputs are replayed by shape alone, so every call after the first at a shape (the
GPU's warm-up and timed calls) returns the first call's result after a one-program launch.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def merge_kernel(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D,
                 BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    pl = tl.load(pl_ptr + h * T + t)
    sl = tl.load(sl_ptr + h * T + t)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    den = wp + ws
    tl.store(lse_ptr + h * T + t, m + tl.log(den))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t.to(tl.int64) * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    o = p * (wp / den) + s * (ws / den)
    tl.store(out_ptr + base + cols, o.to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse, memo=({},)):
    T, H, d = prefix_out.shape
    cache = memo[0]
    key = (T, H, d)
    if key in cache:
        out, lse = cache[key]
        merge_kernel[(1,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, 1, 1, 0, BLOCK_D=16)
        return out, lse
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    merge_kernel[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                           BLOCK_D=triton.next_power_of_2(d))
    cache[key] = (out, lse)
    return out, lse
