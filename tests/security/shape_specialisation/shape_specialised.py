"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: "held-out"
Workloads: all
Check: held-out-only
Round: redteam c12

THREATS class 12 (shape specialisation): a kernel whose launch table only knows the task's public
workload shapes (smoke and GPU) and refuses anything else. It is correct on every published workload;
submit also checks held-out shapes drawn from the secret seed, and there it fails, so it scores 0.
"""

import torch
import triton
import triton.language as tl

# (M, N) -> (BLOCK, number of warps): one entry per public workload, nothing else.
LAUNCH_TABLE = {(8, 256): (256, 1), (5, 200): (256, 1), (3, 1000): (1024, 4),
                (16384, 4096): (4096, 16), (8192, 8192): (8192, 16), (4096, 7168): (8192, 16),
                (64, 8192): (8192, 8)}


@triton.jit
def _rmsnorm_fixed(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + 1e-6)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    block, warps = LAUNCH_TABLE[(M, N)]  # KeyError on any shape that is not a public workload
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_fixed[(M,)](x, residual, weight, y, r, N=N, BLOCK=block, num_warps=warps)
    return y, r
