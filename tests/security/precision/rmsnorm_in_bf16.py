"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "more than one bfloat16 step"
Mode: test
Workloads: all
Round: redteam c09

THREATS class 9 (precision downgrade, inside the tolerance): the task says to compute in fp32; this
kernel rounds the sum to bf16, squares, reduces and normalises in bf16, and only takes the rsqrt in fp32
(Triton's math functions reject bf16). Both outputs are bf16 and stay within the default bf16 tolerance
(2e-2), but the task's checker asks every element to be within one bf16 step of the expected value,
which fp32 math rounded once always is and this is not: it is expected to FAIL.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_bf16(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0) + tl.load(r_ptr + row + cols, mask=mask, other=0.0)
    sq = s * s
    ss = tl.sum(sq, axis=0).to(tl.bfloat16)
    rstd = tl.rsqrt(ss.to(tl.float32) / N + eps).to(tl.bfloat16)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row + cols, s * rstd * w, mask=mask)
    tl.store(ro_ptr + row + cols, s, mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_bf16[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, r
