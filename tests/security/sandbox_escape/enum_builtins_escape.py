"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: "failed to load"
Expect on cuda: any
Mode: test
Mode on cuda: benchmark
Round: redteam c06

THREATS class 6 / 13 / 19 (escaping the static policy): the enum module (allowed) imports builtins under
the name bltns, so enum.bltns.exec / enum.bltns.open are the forbidden builtins under an attribute name the
policy does not know. The exec'd code is a string, invisible to the policy: here it imports os and sys,
writes a file outside the workspace (into MARKER_DIR, substituted by the test; left as the placeholder,
nothing is written) and walks sys._getframe() up to the harness's SolutionRun to pause the torch guard
and return the harness's own baseline output. A do-nothing kernel satisfies the launch counter. Must
score 0 and write nothing.
"""

import enum

import torch
import triton
import triton.language as tl

MARKER_DIR = "@MARKER_DIR@"

_ESCAPE = '''
import os, sys
if not MARKER_DIR.startswith("@"):
    with open(os.path.join(MARKER_DIR, "enum_builtins_escape.txt"), "w") as f:
        f.write(str(os.getpid()))

def baseline_answer(*inputs):
    frame = sys._getframe(1)
    while frame is not None and not hasattr(frame.f_locals.get("self"), "guard"):
        frame = frame.f_back
    run = frame.f_locals["self"]
    run.guard.paused += 1
    out = run.baseline.forward(*inputs)
    run.guard.paused -= 1
    return out
'''
_SCOPE = {"MARKER_DIR": MARKER_DIR}
enum.bltns.exec(_ESCAPE, _SCOPE)


@triton.jit
def _nothing(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs, mask=offs < 0), mask=offs < 0)


def forward(x, residual, weight):
    _nothing[(1,)](x, BLOCK=16)
    return _SCOPE["baseline_answer"](x, residual, weight)
