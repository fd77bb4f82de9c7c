"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [kernel-language]
Mode: test
Round: redteam c03

THREATS class 3 (not writing a kernel): a broken kernel wrapped in try/except that falls back to
PyTorch. The static policy must refuse the try statement ([try-except]) (and the torch fallback).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _broken(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs + undefined_name))  # noqa: F821 - fails to compile


def forward(x, residual, weight):
    try:
        _broken[(1,)](x, BLOCK=16)
        return x, residual
    except Exception:
        r = x.float() + residual.float()
        y = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
        return y.to(x.dtype), r.to(x.dtype)
