"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Mode: test
Round: redteam c03

THREATS class 3 (not writing a kernel): F.* via an import alias (import torch.nn.functional as F),
with a token kernel launch. The static policy resolves the alias and must refuse F.rms_norm
([torch-work]).
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _token(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _token[(1,)](x, BLOCK=16)
    r = torch.empty_like(x)
    r.copy_(x + residual)
    return F.rms_norm(r, (x.shape[-1],), weight, 1e-6), r
