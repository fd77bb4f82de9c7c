"""Task: fused_add_rmsnorm
Backend: interpreter
Behind the policy: "forward raised"
Policy: accepts
Mode: test
Round: redteam c07

THREATS class 7 (tensor subclasses): return a torch.Tensor subclass (which could defer its work to
the untimed checker through __torch_function__). The values are even correct here: the output must be an
exact torch.Tensor ([output-type]). (Under the harness's dispatch mode a subclass cannot be constructed
inside forward, so the buffers are made at import time, one per public shape, with the legacy
constructor, which the static policy does not see as a torch call.)
"""

import torch
import triton
import triton.language as tl


class _Deferred(torch.Tensor):
    pass


PUBLIC_SHAPES = [(8, 256), (5, 200), (3, 1000)]
_BUFFERS = {(M, N): _Deferred(M, N // 2).view(torch.bfloat16) for M, N in PUBLIC_SHAPES}  # fp32 pairs as bf16


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y, r = _BUFFERS[(M, N)], torch.empty_like(x)
    _rmsnorm_rows[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, r
