"""Task: every
Backend: interpreter
Expect: "forward raised"
Round: redteam c06

THREATS class 6 (reading the expected answer): inspect.stack() to reach the harness's frames and the
expected outputs in their locals. The inspect module is not importable ([forbidden-import]).

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import inspect

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    for frame in inspect.stack():
        if "expected" in frame.frame.f_locals:
            return frame.frame.f_locals["expected"]
    raise RuntimeError("no expected output found")
