"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: [gpu-compile]
Behind the policy on cuda: any
Mode on cuda: test
Round: gpu_validity g01

Class: 3 (not a kernel the GPU would run) - Python control flow on a block tensor.
Idea: ``if mask:`` around the stores, with ``mask = cols < N`` a block of booleans. Triton's GPU
compiler refuses it ("Boolean value of Tensor with more than one value is ambiguous"); the stock
interpreter took the branch (a block's truth value was True) and the kernel was right on the CPU,
earning the full reward for code that never compiles on the GPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if mask:
        tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, ro
