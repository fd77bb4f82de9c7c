"""Task: every
Backend: interpreter
Expect: "forward raised"
Mode: test
Check: env-submit
Round: redteam c19

THREATS class 19 / 13 (file writes): open() a file outside the workspace (MARKER_DIR, substituted by
the test; left as the placeholder, the write goes nowhere useful) and write to it. The builtin open is
refused statically ([introspection]).

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
"""

import torch
import triton
import triton.language as tl

MARKER_DIR = "@MARKER_DIR@"


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(*inputs):
    _nothing[(1,)](inputs[0], BLOCK=16)
    with open(MARKER_DIR + "/open_escape.txt", "w") as f:
        f.write("escaped")
    return inputs
