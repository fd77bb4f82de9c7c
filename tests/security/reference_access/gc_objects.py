"""Task: every
Backend: interpreter
Expect: "forward raised"
Round: redteam c06

THREATS class 6 (reading the expected answer): walk gc.get_objects() for a tensor with the output's
shape (the expected output, were it in this process) and copy it. The gc module is not importable
([forbidden-import]); and the expected outputs never exist in the solution's process anyway.

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import gc

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    found = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.shape == inputs[0].shape
             and all(o is not i for i in inputs)]
    return found[0]
