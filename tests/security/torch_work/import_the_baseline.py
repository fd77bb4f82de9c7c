"""Task: every
Backend: interpreter
Expect: "failed to load"
Round: redteam c03

THREATS class 3 (not writing a kernel): inherit the baseline by importing it (it is beside
solution.py in the workspace), keeping a token kernel launch. The static policy must refuse the import
([forbidden-import]).

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import torch
import triton
import triton.language as tl

from baseline import forward as _baseline_forward


@triton.jit
def _token(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _token[(1,)](inputs[0], BLOCK=16)
    return _baseline_forward(*inputs)
