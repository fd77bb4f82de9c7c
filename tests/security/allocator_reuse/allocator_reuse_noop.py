"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "outside atol" | "contains NaN" | "infinities differ" | "scales differ" | "more than one fp8 step" | "more than one bfloat16 step" | [degenerate]
Mode: test
Round: redteam c01

THREATS class 1 (allocator reuse): allocate the outputs with torch.empty_like and launch a kernel that
writes nothing, hoping the allocator hands back a freed block that still holds the expected answer.

On the CPU there is no expected answer in this process (the check runs elsewhere), so whatever the empty
tensors hold (zeros, stale bytes, NaN) must fail: [degenerate], NaN, or the element-wise tolerance.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _touch_nothing(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < 0  # never true: no element is written
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


def forward(x, residual, weight):
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _touch_nothing[(1,)](y, y.numel(), BLOCK=16)
    return y, residual_out
