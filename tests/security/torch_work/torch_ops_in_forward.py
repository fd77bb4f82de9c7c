"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Mode: test
Check: env-submit
Round: redteam c03

THREATS class 3 (not writing a kernel): forward does the work with torch ops (the baseline's math),
and launches a token Triton kernel so that a launch is present. The static policy must refuse the torch
calls and tensor methods in host code ([torch-work]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _token(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _token[(1,)](x, BLOCK=16)
    r = x.float() + residual.float()
    y = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    return y.to(x.dtype), r.to(x.dtype)
