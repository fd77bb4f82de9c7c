"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Mode: test
Round: redteam c03

THREATS class 3 (not writing a kernel): F.* reached through a plain assignment alias (t = torch), which
the static policy's alias tracking (imports only) does not follow, with a token kernel launch.

Either the policy follows the alias (it does now) and refuses it statically, or the runtime dispatch
guard sees the aten operators forward runs outside any Triton launch: [torch-work] both ways.
"""

import torch
import triton
import triton.language as tl

t = torch


@triton.jit
def _token(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _token[(1,)](x, BLOCK=16)
    r = x + residual
    return t.nn.functional.rms_norm(r, (x.shape[-1],), weight, 1e-6), r
