"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [record]
Behind the policy: [record]
Round: attribute chains ac12

Class 2 (output replay / state between calls), through a module-level op class (allowed since issue
25: an undecorated class with ``__init__`` and ``__call__``, ``__init__`` setting its own instance's
attributes). The instance is made at import, and its ``__init__`` allocates a device tensor that
lives as long as the module: every call's kernel counts into it, the channel a replay needs (on a
GPU: a fingerprint of the last inputs and a copy of the outputs). The policy accepts it (allocation
is host code's, and the class's instance is the file's own); the worker's walk of what the module
reaches (kept_state.py) enters instances of the file's classes and finds the tensor ([hidden-state]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, state_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)
    if row == 0:
        tl.store(state_ptr, tl.load(state_ptr) + 1)


class RMSNorm:
    def __init__(self, eps):
        self.eps = eps
        self.calls = torch.zeros(16, dtype=torch.int32)

    def __call__(self, x, residual, weight):
        M, N = x.shape
        y = torch.empty_like(x)
        ro = torch.empty_like(x)
        _rmsnorm[(M,)](x, residual, weight, y, ro, self.calls, N, self.eps, BLOCK=triton.next_power_of_2(N))
        return y, ro


_op = RMSNorm(1e-6)


def forward(x, residual, weight):
    return _op(x, residual, weight)
