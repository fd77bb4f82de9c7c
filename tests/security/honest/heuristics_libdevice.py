'''Task: merge_attn_states
Backend: cuda
Expect: paid
Policy: accepts
Round: holdout2 r32

False-positive probe: triton.heuristics with a lambda, libdevice (tl.extra.cuda.libdevice) and
tl.where, a grid lambda.
Task: merge_attn_states
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.heuristics({"BLOCK_D": lambda args: triton.next_power_of_2(args["D"])})
@triton.jit
def _merge(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    pl = tl.load(pl_ptr + h * T + t)
    sl = tl.load(sl_ptr + h * T + t)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = libdevice.exp(pl - m)
    ws = libdevice.exp(sl - m)
    cols = tl.arange(0, BLOCK_D)
    cm = cols < D
    p = tl.load(p_ptr + pid * D + cols, mask=cm).to(tl.float32)
    s = tl.load(s_ptr + pid * D + cols, mask=cm).to(tl.float32)
    tl.store(out_ptr + pid * D + cols, ((wp * p + ws * s) / (wp + ws)).to(out_ptr.dtype.element_ty), mask=cm)
    tl.store(lse_ptr + h * T + t, m + libdevice.log(wp + ws))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge[lambda meta: (T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d)
    return out, lse
