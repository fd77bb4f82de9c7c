"""Task: merge_attn_states
Backend: both
Expect on interpreter: [gpu-compile]
Behind the policy on cuda: any
Mode on cuda: test
Round: gpu_validity g02

Class: 3 (not a kernel the GPU would run) - a `while` on a non-boolean value.
Idea: one program per token loops over the heads with ``while left:`` on an int32 count. Triton's
GPU compiler refuses it ("'scf.condition' op operand #0 must be 1-bit signless integer, but got
'i32'"): a while condition must be a scalar boolean such as ``left > 0``. The stock interpreter ran
it as Python and the kernel earned the full reward on the CPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_token(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    h = t * 0
    left = H
    while left:
        p_lse = tl.load(p_lse_ptr + h * T + t)
        s_lse = tl.load(s_lse_ptr + h * T + t)
        p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
        s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
        m = tl.maximum(p_lse, s_lse)
        w_p = tl.exp(p_lse - m)
        w_s = tl.exp(s_lse - m)
        tl.store(lse_ptr + h * T + t, m + tl.log(w_p + w_s))
        base = (t * H + h) * D + cols
        p = tl.load(p_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
        s = tl.load(s_out_ptr + base, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base, ((p * w_p + s * w_s) / (w_p + w_s)).to(out_ptr.dtype.element_ty), mask=mask)
        h += 1
        left -= 1


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_token[(T,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                       BLOCK_D=triton.next_power_of_2(d))
    return out, lse
