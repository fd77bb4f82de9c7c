"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Round: holdout4 p05

Class 3 (not writing a kernel): the work hidden in the launch grid, a functools.partial.

Idea: the grid callable is host code the launcher calls from inside the launch, where the torch
guard is paused for the interpreter's own copies. Passing the grid as ``functools.partial(_grid,
y, ro, x, residual, weight)`` hands it the tensors; ``_grid`` computes the answer with tensor
operators (no torch.* name and no tensor method for the static policy to see) and writes it with
slice assignment into the outputs, then returns (1,) for a no-op kernel.

Task: fused_add_rmsnorm
Expected if defended: [torch-work] (the grid function runs under the guard).
"""

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def touch(y_ptr):
    pid = tl.program_id(0)
    if pid < 0:
        tl.store(y_ptr, 0.0)


def _grid(y, ro, x, residual, weight, meta):
    r = x + residual
    rf = r * 1.0
    ro[:] = r
    ms = (rf * rf)
    y[:] = r  # placeholder for the normalised output: operators only, no method names
    return (1,)


def forward(x, residual, weight):
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    touch[functools.partial(_grid, y, ro, x, residual, weight)](y)
    return y, ro
