"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "contains NaN" | [degenerate]
Mode: test
Round: redteam c06

THREATS class 6 (NaN outputs, for checkers that ignore NaN): the kernel writes NaN everywhere. NaN
never passes ("contains NaN"; a constant NaN output may also be reported as [degenerate]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_nan(y_ptr, r_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    nan = tl.full([BLOCK], float("nan"), tl.float32)
    tl.store(y_ptr + offs, nan.to(tl.bfloat16), mask=mask)
    tl.store(r_ptr + offs, nan.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    y, r = torch.empty_like(x), torch.empty_like(x)
    _fill_nan[(triton.cdiv(x.numel(), 256),)](y, r, x.numel(), BLOCK=256)
    return y, r
