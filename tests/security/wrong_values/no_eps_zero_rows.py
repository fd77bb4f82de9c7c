"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "contains NaN"
Round: holdout6 t24

Class: 12 (specialisation to the tested inputs: held-out values).
Idea: eps is dropped (rstd = rsqrt(mean(r*r))). Every generated row has a per-row scale and random
values, so no row is ever all zeros; on a zero row (a padding token, which the spec covers: any
input, eps = 1e-6) this kernel returns NaN where the answer is 0. The workload family is held out
in shape only, never in value structure, so the missing case is never exercised.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, y_ptr, r_out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(r_out_ptr + row + cols, r.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r_out = torch.empty_like(x)
    _kernel[(M,)](x, residual, weight, y, r_out, N, BLOCK=triton.next_power_of_2(N))
    return y, r_out
