"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: any
Behind the policy on cuda: any
Mode on cuda: test
Round: gpu_validity g05

Class: 3 (what runs is not what the GPU computes) - ``and`` on block tensors.
Idea: ``mask = (cols < 0) and (cols < N)``. Triton's GPU compiler reads ``and`` on tensors as an
elementwise logical and (deprecated, with a warning): an empty mask, nothing stored, wrong. The stock
interpreter ran Python's ``and``: a block's truth value is True, so the mask was ``cols < N`` and
the kernel was right on the CPU only. The interpreter now computes the GPU's meaning.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = (cols < 0) and (cols < N)
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, ro
