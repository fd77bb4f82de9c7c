"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "bfloat16 step"
Round: holdout4 p18

Class 9 (precision downgrade): rstd and the weight product in bf16.

Idea: the row statistic is rounded to bf16 and y is formed as bf16(r) * bf16(rstd) * w in bf16
arithmetic (packed bf16 multiplies on the GPU), instead of fp32 math rounded once.

Task: fused_add_rmsnorm
Expected if defended: scored 0 by the one-step checker ("more than one bfloat16 step off").
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rms_bf16(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(v * v, axis=0) / N + eps).to(tl.bfloat16)
    vb = v.to(tl.bfloat16)
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    tl.store(y_ptr + row * N + cols, vb * rstd * w, mask=m)
    tl.store(ro_ptr + row * N + cols, vb, mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    rms_bf16[(M,)](x, residual, weight, y, ro, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, ro
