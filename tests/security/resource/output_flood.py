"""Task: every
Backend: interpreter
Expect: "printed more than 64 MB"
Mode: test
Check: recovers, output-clipped
Round: redteam c19

THREATS class 19 (floods): print about 100 MB from forward. The harness drains the output, keeps a
clipped tail, and kills the process once it has printed more than its cap ("printed more than 64 MB");
the next evaluation must work.

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    line = "flood " * 174763  # ~1 MiB per print
    for _ in range(100):
        print(line)
    raise RuntimeError("the flood should have been stopped before this")
