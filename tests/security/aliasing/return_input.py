"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [aliasing]
Mode: test
Round: redteam c08

THREATS class 8 (aliasing): return the inputs themselves as the outputs (after a token launch). Outputs
must not share storage with an input ([aliasing]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _nothing[(1,)](x, BLOCK=16)
    return x, residual
