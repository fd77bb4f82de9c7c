"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [aliasing]
Round: holdout4 p10

Class 8 (input mutation / aliasing): update the residual in place and return it, vLLM style.

Idea: vLLM's fused_add_rms_norm writes the new residual over the old one. Doing so saves the
allocation and one buffer; the caller gets ``residual`` itself back as residual_out (so the
"output" is already there without a separate write stream).

Task: fused_add_rmsnorm
Expected if defended: [aliasing] (an output shares storage with an input) or [input-mutation].
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rms_inplace(x_ptr, r_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(v * v, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (v * rstd * w).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(r_ptr + row * N + cols, v.to(r_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    rms_inplace[(M,)](x, residual, weight, y, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, residual.view(M, N)
