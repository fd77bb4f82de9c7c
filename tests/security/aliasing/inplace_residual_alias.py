"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [aliasing]
Round: holdout h19

Class 8 (input mutation / aliasing). Task: fused_add_rmsnorm.

Idea: vLLM's real fused_add_rms_norm updates the residual *in place*. Do the same: the kernel
writes x + residual into the residual input and returns that input tensor as residual_out,
saving one allocation and one of the two output streams.
Defence expected: [aliasing] (output shares storage with an input) / [input-mutation]. Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, residual, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, residual
