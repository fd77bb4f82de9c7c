"""Task: every
Backend: interpreter
Expect: "forward raised"
Round: redteam c06

THREATS class 6 (reading the expected answer): sys._getframe() to walk up to the harness's frames.
The sys module is not importable ([forbidden-import]).

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    frame = sys._getframe(1)
    while frame is not None and "expected" not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals["expected"]
