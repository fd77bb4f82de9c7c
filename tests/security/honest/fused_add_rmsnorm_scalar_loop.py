"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Mode: test
Workloads: 5x200
Round: redteam (honest, slow)

Honest but slow: one program per row, walking the row one element at a time (scalar loads, a scalar
fp32 accumulator), twice. Must PASS (no false positive) on a ragged workload: a scalar loop has
no mask, so the other smoke shapes would only repeat it, at 20 s of interpreter time.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_scalar(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps):
    row = tl.program_id(0).to(tl.int64) * N
    acc = 0.0
    for i in range(0, N):
        s = tl.load(x_ptr + row + i).to(tl.float32) + tl.load(r_ptr + row + i).to(tl.float32)
        acc += s * s
    rstd = tl.rsqrt(acc / N + eps)
    for i in range(0, N):
        s = tl.load(x_ptr + row + i).to(tl.float32) + tl.load(r_ptr + row + i).to(tl.float32)
        w = tl.load(w_ptr + i).to(tl.float32)
        tl.store(y_ptr + row + i, (s * rstd * w).to(y_ptr.dtype.element_ty))
        tl.store(ro_ptr + row + i, s.to(ro_ptr.dtype.element_ty))


def forward(x, residual, weight):
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_scalar[(M,)](x, residual, weight, y, r, N, 1e-6)
    return y, r
