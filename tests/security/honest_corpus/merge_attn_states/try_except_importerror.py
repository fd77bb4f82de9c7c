"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1284565367
Round: honest corpus

Idiom: try/except ImportError around an optional import (libdevice exp/log, else the tl.math ones)."""

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice as fast_math
except ImportError:  # older Triton without triton.language.extra.libdevice
    fast_math = tl.math


@triton.jit
def _merge_kernel(out_ptr, lse_ptr, p_out_ptr, p_lse_ptr, s_out_ptr, s_lse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    p_lse = tl.load(p_lse_ptr + h * T + t)
    s_lse = tl.load(s_lse_ptr + h * T + t)
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    p_w = fast_math.exp(p_lse - m)
    s_w = fast_math.exp(s_lse - m)
    tl.store(lse_ptr + h * T + t, m + fast_math.log(p_w + s_w))
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    base = (t.to(tl.int64) * H + h) * D
    p = tl.load(p_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(s_out_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    out = (p * p_w + s * s_w) / (p_w + s_w)
    tl.store(out_ptr + base + cols, out.to(tl.bfloat16), mask=mask)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty_like(prefix_lse)
    _merge_kernel[(T, H)](out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, D,
                          BLOCK_D=triton.next_power_of_2(D), num_warps=1)
    return out, lse
