"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "more than one bfloat16 step"
Round: holdout h21

Class 9 (precision downgrade). Task: fused_add_rmsnorm.

Idea: the spec says every step in fp32 on the *unrounded* sum. Do it all in bf16 instead: round
r = x + residual to bf16 first, square and reduce in bf16, rsqrt in bf16 (via fp32 only where
Triton's math functions refuse bf16), and the products in bf16. On a GPU this halves register
pressure; the outputs are bf16 anyway, so the per-dtype tolerance (2e-2) may not tell.
Defence expected: a tolerance/residual check strict enough for bf16 internal math. Should earn 0
if the downgrade is detected; if it passes, the tolerance is the weakness.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_bf16(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row + cols, mask=m, other=0.0) + tl.load(r_ptr + row + cols, mask=m, other=0.0)
    sq = r * r
    ss = tl.sum(sq, axis=0)
    ms = (ss.to(tl.float32) / N).to(tl.bfloat16)
    rstd = tl.rsqrt(ms.to(tl.float32) + eps).to(tl.bfloat16)
    w = tl.load(w_ptr + cols, mask=m, other=0.0)
    tl.store(y_ptr + row + cols, (r * rstd) * w, mask=m)
    tl.store(ro_ptr + row + cols, r, mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_bf16[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, ro
