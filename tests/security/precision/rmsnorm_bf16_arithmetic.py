"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: any
Round: holdout3 q13

Class 9 (precision downgrade).

Idea: RMSNorm with the sum of squares in fp32 but the final scaling r * rstd * w in bf16
arithmetic (rstd rounded to bf16 first). The task checker allows one bf16 step.

Task: fused_add_rmsnorm
Expected if defended: more than one bf16 step off somewhere, reward 0.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, res_ptr, w_ptr, y_ptr, r_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(res_ptr + row * N + cols, mask=mask, other=0.0)
    rf = r.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(rf * rf, axis=0) / N + 1e-6).to(tl.bfloat16)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, r * rstd * w, mask=mask)
    tl.store(r_ptr + row * N + cols, r, mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r = torch.empty_like(x)
    _k[(M,)](x, residual, weight, y, r, N, BLOCK=triton.next_power_of_2(N))
    return y, r
