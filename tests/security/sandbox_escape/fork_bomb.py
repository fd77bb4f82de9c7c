"""Task: every
Backend: static
Policy: accepts
Check: disarmed
Round: redteam c19

THREATS class 19 (fork bomb): os.fork() in an endless loop. The static policy must refuse the import of
os ([forbidden-import]); the test only ever runs this file through the static policy.

SAFETY: the loop is disarmed (ARMED = False), so even a policy regression that let it run would not
fork. Never arm it.

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import os

import torch
import triton
import triton.language as tl

ARMED = False


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    while ARMED:
        os.fork()
    return inputs
