"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "killed"
Limits: hang
Check: recovers
Round: holdout h31

Class 19 (hang). Task: fused_add_rmsnorm.

Idea: a kernel whose loop bound is a runtime value that never runs out (the interpreter runs the
body as Python; on a GPU it is a spinning kernel).
Defence expected: the per-phase time limit kills the process group; the env stays usable. The
test uses an Evaluator with short phase limits. Should earn 0 ("killed: phase ... exceeded").
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _spin(p, N):
    i = 0
    while i < N:
        i = i + 1 - 1


def forward(x, residual, weight):
    _spin[(1,)](x, 1)
    return torch.empty_like(x), torch.empty_like(x)
