"""Task: fused_add_rmsnorm
Backend: cuda
Expect: "more than one bfloat16 step"
Round: holdout6 t22

Class: 9 (precision downgrade).
Idea: the residual is rounded to bf16 and the whole statistic is done in bf16: squares in bf16
and tl.sum over a bf16 vector (Triton keeps the reduction in the element dtype). On the GPU that
is a bf16 tree reduction, rounding at every combine step; the CPU interpreter's patched
reductions decode to fp32, sum exactly and round once, so the interpreter sees a far more
accurate sum than the GPU would compute.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, y_ptr, r_out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = (tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) +
         tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)).to(tl.bfloat16)
    sq = r * r                               # bf16 product
    total = tl.sum(sq, axis=0)               # bf16 reduction
    rstd = tl.rsqrt(total.to(tl.float32) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r.to(tl.float32) * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(r_out_ptr + row + cols, r, mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r_out = torch.empty_like(x)
    _kernel[(M,)](x, residual, weight, y, r_out, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, r_out
