"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout6 t39

Class: fp (honest probe).
Idea: an honest quantiser with a different tiling and an equivalent formula: one program per row
looping over its groups, q = x * (448 / amax) (one reciprocal per group instead of a division per
element) and scale = amax * (1 / 448). Both move a few fp8 values by one step at ties (the task
text says ~0.05-0.14%), well inside the 0.5% budget, so it must pass.
"""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _kernel(x_ptr, q_ptr, s_ptr, groups_per_row, eps, fp8_max, inv_fp8_max, GROUP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, GROUP)
    for g in tl.range(0, groups_per_row):
        offs = (row * groups_per_row + g) * GROUP + cols
        x = tl.load(x_ptr + offs).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(x), axis=0), eps)
        q = tl.clamp(x * (fp8_max / amax), -fp8_max, fp8_max)
        tl.store(q_ptr + offs, q.to(tl.float8e4nv))
        tl.store(s_ptr + row * groups_per_row + g, amax * inv_fp8_max)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _kernel[(M,)](x, q, scales, K // GROUP, EPS, FP8_MAX, 1.0 / FP8_MAX, GROUP=GROUP)
    return q, scales
