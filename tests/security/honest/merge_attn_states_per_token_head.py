"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Mode: test
Workloads: all
Round: redteam (honest, slow)

Honest but slow: one program per (token, head) pair, a 2-D grid, strided loads for the LSEs (no
coalescing, no token blocking). Must PASS every workload (no false positive).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_pair(out_ptr, lse_ptr, p_ptr, pl_ptr, s_ptr, sl_ptr, T, H, D, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    p_lse = tl.load(pl_ptr + h * T + t)
    s_lse = tl.load(sl_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.exp(p_lse - m)
    ws = tl.exp(s_lse - m)
    denom = wp + ws
    tl.store(lse_ptr + h * T + t, m + tl.log(denom))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, (p * (wp / denom) + s * (ws / denom)).to(out_ptr.dtype.element_ty), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _merge_pair[(T, H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d,
                        BLOCK_D=triton.next_power_of_2(d))
    return out, lse
