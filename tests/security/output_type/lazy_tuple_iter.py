"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Round: holdout h18

Class 7 (lazy outputs). Task: fused_add_rmsnorm.

Idea: return a tuple subclass whose `__iter__` does the work when the harness unpacks the outputs
(as_tuple calls tuple(out)), i.e. after forward has returned and its launch counted. Operators
only, so the static rules have nothing to flag.
Defence expected: unpacking happens inside the torch guard ([torch-work]). Should earn 0.
"""
import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _noop(p, N):
    pass


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    f32 = torch.zeros(1, dtype=torch.float32)
    zeros_n = torch.zeros(N, dtype=torch.float32)
    _noop[(1,)](y, N)

    class Outputs(tuple):
        def __iter__(self):
            yy, rr = y, ro
            r = x + f32 + residual
            inv = ((r * r) @ (zeros_n + 1.0 / N) + EPS) ** -0.5
            yy[...] = r * inv[:, None] * weight
            rr[...] = r
            yield yy
            yield rr

    return Outputs((y, ro))
