"""Task: every
Backend: interpreter
Expect: "forward raised"
Round: redteam c06

THREATS class 6 (reaching the interpreter through builtins): use __builtins__ and the builtins module
to get __import__ and import what the policy forbids. Refused statically ([introspection] for the dunder
name, [forbidden-import] for the module).

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import builtins

import torch
import triton
import triton.language as tl

_sys = __builtins__["__import__"]("sys") if isinstance(__builtins__, dict) else builtins.__import__("sys")


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    return _sys._getframe(1).f_locals["expected"]
