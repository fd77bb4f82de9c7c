"""Task: fused_add_rmsnorm
Backend: both
Expect: [torch-work]
Mode: test
Mode on cuda: benchmark
Round: redteam c03

THREATS class 3 (kernel launched, work done in torch): a dummy kernel is launched, and the whole
computation is written with tensor operators (+, *, @, **) and subscript assignment in host code, none of
which is a call the static policy can see. The runtime dispatch guard must catch the aten operators
([torch-work]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _dummy(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _dummy[(1,)](x, BLOCK=16)
    f = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    f[...] = x
    g = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    g[...] = residual
    f += g
    w = torch.empty(weight.shape, dtype=torch.float32, device=x.device)
    w[...] = weight
    rstd = ((f * f) @ (w ** 0) / x.shape[1] + 1e-6) ** -0.5
    y = torch.empty_like(x)
    y[...] = f * rstd[:, None] * w
    r = torch.empty_like(x)
    r[...] = f
    return y, r
