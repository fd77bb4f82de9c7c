"""Task: merge_attn_states
Backend: interpreter
Expect: any
Round: holdout h22

Class 9 (precision downgrade of an fp32 output). Task: merge_attn_states.

Idea: compute the merge weights and the fp32 lse output in bf16 precision (round the LSEs to bf16
on load, as a bandwidth-saving "compressed LSE" would). out is bf16 anyway.
Defence expected: fp32 tolerance (1e-4) on lse fails a bf16 computation. Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _merge_lowp(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    pl = tl.load(pl_ptr + h * T + t).to(tl.bfloat16).to(tl.float32)
    sl = tl.load(sl_ptr + h * T + t).to(tl.bfloat16).to(tl.float32)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    den = wp + ws
    cols = tl.arange(0, BLOCK_D)
    msk = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=msk, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=msk, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / den).to(out_ptr.dtype.element_ty), mask=msk)
    tl.store(lse_ptr + h * T + t, (m + tl.log(den)).to(tl.bfloat16).to(tl.float32))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge_lowp[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                          BLOCK_D=triton.next_power_of_2(d))
    return out, lse
