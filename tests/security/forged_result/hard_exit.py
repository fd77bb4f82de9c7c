"""Task: every
Backend: interpreter
Expect: "before reporting"
Behind the policy: "died (exit status 0) before reporting"
Limits: short
Check: recovers
Round: redteam c19

THREATS class 14 / 19 (early exit): print "PASSED" and leave with os._exit(0), which skips every
handler. Statically: os is not importable ([forbidden-import]). Behind the policy (bypassed on purpose by
the test): an exit before the harness reports must be a failure ("died (exit status 0) before
reporting").

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    print("PASSED")
    os._exit(0)
