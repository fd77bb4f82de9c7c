"""Task: merge_attn_states
Backend: interpreter
Expect: [aliasing] | [input-mutation]
Mode: test
Round: redteam c08

THREATS class 8 (aliasing through a view): compute the merged output in place into prefix_out's
storage (the values are right) and return a view of it, saving the allocation. An output may not share
storage with an input, even as a view ([aliasing]) (and the input changed: [input-mutation]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p_lse = tl.load(pl_ptr + h * T + t)
    s_lse = tl.load(sl_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / (wp + ws)).to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge[(T * H,)](prefix_out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                     BLOCK_D=triton.next_power_of_2(d))
    return prefix_out.view(T, H, d), lse
