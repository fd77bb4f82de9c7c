"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "forward raised"
Round: holdout h17

Class 7 (tensor subclass). Task: fused_add_rmsnorm.

Idea: return instances of a torch.Tensor subclass (torch.Tensor is an allowed name, so
`class Lazy(torch.Tensor)` passes the policy; `_PROTO.new_empty(...)` allocates one). A real lazy
subclass would materialise the answer inside the untimed checker; here the placeholder holds
garbage, so only the type check stands between it and the checker.
Defence expected: exact type check ([output-type]). Should earn 0.
"""
import torch
import triton
import triton.language as tl


class Lazy(torch.Tensor):
    pass


_PROTO = Lazy()  # made at import, outside the harness's dispatch mode


@triton.jit
def _noop(p, N):
    pass


def forward(x, residual, weight):
    y = _PROTO.new_empty(x.shape, dtype=x.dtype)
    ro = _PROTO.new_empty(x.shape, dtype=x.dtype)
    _noop[(1,)](y, 1)
    return y, ro
