"""Task: every
Backend: interpreter
Limits: short
Check: env-hang-recovers
Round: redteam c19

THREATS class 19 (hangs): an infinite Python loop in forward, after a real launch. The check phase's
time limit must kill the process group ("exceeded its N s limit"), and the next evaluation must work.
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
    while True:
        pass
