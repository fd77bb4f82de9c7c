"""Task: every
Backend: interpreter
Expect: "before reporting"
Behind the policy: "died (exit status -11 (SIGSEGV)) before reporting"
Mode: test
Limits: short
Check: recovers
Round: redteam c19

THREATS class 19 (crashes): dereference NULL through ctypes.string_at(0), killing the process with
SIGSEGV after printing "PASSED". Statically: ctypes is not importable ([forbidden-import]). Behind the
policy (the test bypasses it on purpose): the process dies before reporting, which must be a failure
("died (exit status -11) before reporting"), and the next evaluation must work.

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import ctypes

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
    ctypes.string_at(0)
    return inputs
