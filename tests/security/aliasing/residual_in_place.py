"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [aliasing]
Round: holdout5 s10

Class 8 (input mutation / aliasing): write the new residual over the residual input and return it.

Idea: in vLLM the fused op updates the residual in place, which saves an allocation and keeps the
write in the same lines as the read. The kernel computes correctly but stores the new residual into
``residual`` itself and returns that tensor as ``residual_out``. The task declares no in-place
outputs, so both the aliasing check (output shares an input's storage) and the input-mutation
check should refuse it.
Task: fused_add_rmsnorm
Expected if defended: [aliasing].
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(r_ptr + row + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, residual.view(M, N)
