"""Wrong: treats a +inf LSE (empty partition) as an ordinary score instead of weight zero."""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge(po_ptr, pl_ptr, so_ptr, sl_ptr, o_ptr, l_ptr, T, H, D: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    p_lse = tl.load(pl_ptr + h * T + t)
    s_lse = tl.load(sl_ptr + h * T + t)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    d = tl.arange(0, BLOCK_D)
    mask = d < D
    base = (t.to(tl.int64) * H + h) * D
    po = tl.load(po_ptr + base + d, mask=mask, other=0.0).to(tl.float32)
    so = tl.load(so_ptr + base + d, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptr + base + d, ((po * wp + so * ws) / (wp + ws)).to(tl.bfloat16), mask=mask)
    tl.store(l_ptr + h * T + t, m + tl.log(wp + ws))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge[(T, H)](prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H, D,
                   BLOCK_D=triton.next_power_of_2(D))
    return out, lse
