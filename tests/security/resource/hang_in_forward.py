"""Task: every
Backend: interpreter
Limits: hang
Check: env-hang-recovers
Round: redteam c19

THREATS class 19 (hangs): an infinite Python loop in forward, after a real launch. The check phase's
time limit must kill the process group ("exceeded its N s limit"), and the next evaluation must work.

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
    while True:
        pass
