"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout4 p23

Honest probe: exp2/log2 from tl.math and libdevice-style math through tl.extra, a jit helper
returning a tuple, a functools.partial launcher, and strides passed as a tuple argument.

Idiom: tl.math.exp2 / tl.math.log2, a @triton.jit helper returning two values, functools.partial
around the launch, keyword-only host helper, per-(t, h) programs with a 1-D grid.

Task: merge_attn_states
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import functools
import math

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(math.log(2.0))


@triton.jit
def weights(p_lse, s_lse):
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    wp = tl.math.exp2((p_lse - m) * LOG2E)
    ws = tl.math.exp2((s_lse - m) * LOG2E)
    return m, wp, ws


@triton.jit
def merge_exp2(out_ptr, lse_ptr, p_ptr, plse_ptr, s_ptr, slse_ptr, T, H, D, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    m, wp, ws = weights(tl.load(plse_ptr + h * T + t), tl.load(slse_ptr + h * T + t))
    den = wp + ws
    tl.store(lse_ptr + h * T + t, m + tl.math.log2(den) * LN2)
    cols = tl.arange(0, BLOCK_D)
    mk = cols < D
    base = (t * H + h) * D
    p = tl.load(p_ptr + base + cols, mask=mk, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + base + cols, mask=mk, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + cols, ((p * wp + s * ws) / den).to(out_ptr.dtype.element_ty), mask=mk)


def _launch(kernel, *, grid, block_d, args):
    kernel[grid](*args, BLOCK_D=block_d)


LAUNCH = functools.partial(_launch, merge_exp2)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    LAUNCH(grid=(T * H,), block_d=triton.next_power_of_2(d),
           args=(out, lse, prefix_out, prefix_lse, suffix_out, suffix_lse, T, H, d))
    return out, lse
