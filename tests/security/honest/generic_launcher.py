"""Task: merge_attn_states
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout5 s16

Honest probe: the kernel is handed to a generic launcher (a functools.partial over a helper that
launches ``kernel[grid](...)`` on its parameter), with a device function, keyword-only launch
arguments, tl.static_range over a split head dim, and walrus/ternary host code.
Task: merge_attn_states
Expected: passes the policy and earns reward 1.0 on the interpreter.
"""

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _clean(lse):
    return tl.where(lse == float("inf"), float("-inf"), lse)


@triton.jit
def _merge(po, pl, so, sl, out, lse, T, H, D: tl.constexpr, SPLIT: tl.constexpr):
    pid = tl.program_id(0)
    t = pid // H
    h = pid % H
    p = _clean(tl.load(pl + h * T + t))
    s = _clean(tl.load(sl + h * T + t))
    m = tl.maximum(p, s)
    wp = tl.exp(p - m)
    ws = tl.exp(s - m)
    den = wp + ws
    base = pid.to(tl.int64) * D
    for i in tl.static_range(SPLIT):
        cols = i * (D // SPLIT) + tl.arange(0, D // SPLIT)
        a = tl.load(po + base + cols).to(tl.float32)
        b = tl.load(so + base + cols).to(tl.float32)
        tl.store(out + base + cols, ((a * wp + b * ws) / den).to(out.dtype.element_ty))
    tl.store(lse + h * T + t, m + tl.log(den))


def _launch(kernel, grid, *args, **meta):
    kernel[grid](*args, **meta)


launch_merge = functools.partial(_launch, _merge)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, D = prefix_out.shape
    out = torch.empty_like(prefix_out)
    lse = prefix_lse.new_empty(prefix_lse.shape)
    launch_merge((T * H,), prefix_out, prefix_lse, suffix_out, suffix_lse, out, lse, T, H, D=D,
                 SPLIT=(split := 2 if D >= 128 else 1))
    assert split in (1, 2)
    return out, lse
