"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2681049915
Round: honest corpus

Idiom: __all__ listing the module's public names."""

import torch
import triton
import triton.language as tl

__all__ = ["forward", "merge_attn_states"]


@triton.jit
def _merge_attn_states_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr,
                              T, H, D, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    p_lse = tl.load(p_lse_ptr + h * T + t)
    s_lse = tl.load(s_lse_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    p_w = tl.exp(p_lse - m)
    s_w = tl.exp(s_lse - m)
    denom = p_w + s_w
    tl.store(lse_ptr + h * T + t, m + tl.log(denom))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t.to(tl.int64) * H + h) * D
    p = tl.load(p_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, (p * (p_w / denom) + s * (s_w / denom)).to(tl.bfloat16), mask=mask)


def merge_attn_states(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_attn_states_kernel[(T, H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D,
                                      BLOCK_D=triton.next_power_of_2(D), num_warps=1)
    return out, lse


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    return merge_attn_states(prefix_out, prefix_lse, suffix_out, suffix_lse)
