"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: any
Round: holdout h01

Class 1 (allocator reuse). Task: fused_add_rmsnorm.

Idea: allocate the outputs with torch.empty_like and launch a kernel that writes nothing, hoping
the caching allocator hands back blocks that still hold the expected answer from an earlier
baseline run in the same process.
Defence expected: expected outputs are computed in a separate check process, so the garbage in
the fresh blocks cannot match. Should earn 0 (incorrect values or [degenerate]).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _noop(y_ptr, N):
    pass


def forward(x, residual, weight):
    y = torch.empty_like(x)
    r = torch.empty_like(x)
    _noop[(1,)](y, x.shape[1])
    return y, r
