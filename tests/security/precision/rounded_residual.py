"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Round: holdout4 p17

Class 9 (precision downgrade): normalise the bf16-rounded residual instead of the fp32 sum.

Idea: round r = x + residual to bf16 once, store it, and reuse the bf16 value for the statistics
and for y (one fewer fp32 live value per element; the second pass could re-read residual_out). The
task says the statistics and y use the unrounded fp32 sum, so y moves by up to half a bf16 step
before its own rounding.

Task: fused_add_rmsnorm
Expected if defended: scored 0 by the one-step checker ("more than one bfloat16 step off").
Outcome: accepted by design. vLLM's fused_add_rms_norm sums in the input dtype and normalises the
rounded residual, so this is real-world semantics, within the one-step bound (tests/test_holdout4.py).
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rms_rounded(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    vb = v.to(tl.bfloat16)
    tl.store(ro_ptr + row * N + cols, vb, mask=m)
    vr = vb.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(vr * vr, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (vr * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    rms_rounded[(M,)](x, residual, weight, y, ro, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, ro
