"""Task: merge_attn_states
Backend: interpreter
Expect: "outside atol" | "more than one bfloat16 step"
Mode: test
Round: redteam c09

THREATS class 9 (precision downgrade, detectable): the fp32 LSEs are read, combined and written
through bf16 (half the bytes of fp32 traffic on a GPU). The fp32 output's tolerance (1e-4) must catch it:
elements outside atol/rtol.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_bf16(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p_lse = tl.load(pl_ptr + h * T + t).to(tl.bfloat16).to(tl.float32)
    s_lse = tl.load(sl_ptr + h * T + t).to(tl.bfloat16).to(tl.float32)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m).to(tl.bfloat16).to(tl.float32)
    ws = tl.exp(s_lse - m).to(tl.bfloat16).to(tl.float32)
    tl.store(lse_ptr + h * T + t, (m + tl.log(wp + ws)).to(tl.bfloat16).to(tl.float32))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0)
    tl.store(out_ptr + base + cols, ((p * wp.to(tl.bfloat16) + s * ws.to(tl.bfloat16)) /
                                     (wp + ws)).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge_bf16[(T * H,)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                          BLOCK_D=triton.next_power_of_2(d))
    return out, lse
