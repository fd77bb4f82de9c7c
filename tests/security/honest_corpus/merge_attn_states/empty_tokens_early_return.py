"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1165772353
Round: honest corpus

Idiom: an empty-input early return (no tokens: return empty outputs without launching)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    pl = tl.load(p_lse_ptr + h * T + t)
    sl = tl.load(s_lse_ptr + h * T + t)
    pl = tl.where(pl == float("inf"), float("-inf"), pl)
    sl = tl.where(sl == float("inf"), float("-inf"), sl)
    m = tl.maximum(pl, sl)
    wp = tl.exp(pl - m)
    ws = tl.exp(sl - m)
    tl.store(lse_ptr + h * T + t, m + tl.log(wp + ws))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t.to(tl.int64) * H + h) * D
    p = tl.load(p_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / (wp + ws)).to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty((T, H, D), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    if T == 0 or H == 0:
        return out, lse
    _merge_kernel[(T, H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D,
                          BLOCK_D=triton.next_power_of_2(D), num_warps=1)
    return out, lse
