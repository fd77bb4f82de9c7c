"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "scales differ"
Round: holdout6 t30

Class: 12 (specialisation to the tested inputs: held-out values).
Idea: the eps guard is dropped (scale = amax / 448). The generator draws every group from randn
times a positive scale, so no group is ever all zeros; a zero group (padding rows, which the spec's
max(amax, 1e-10) exists for) gives scale 0 and q = 0/0 = NaN. Held-out workloads vary the shape
only, never the value structure, so nothing exercises the case the spec names.
"""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0


@triton.jit
def _kernel(x_ptr, q_ptr, s_ptr, n_groups, fp8_max, GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gmask = groups < n_groups
    cols = tl.arange(0, GROUP)
    offs = groups.to(tl.int64)[:, None] * GROUP + cols[None, :]
    x = tl.load(x_ptr + offs, mask=gmask[:, None], other=0.0).to(tl.float32)
    scale = tl.max(tl.abs(x), axis=1) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + offs, q.to(tl.float8e4nv), mask=gmask[:, None])
    tl.store(s_ptr + groups, scale, mask=gmask)


def forward(x):
    M, K = x.shape
    n_groups = M * (K // GROUP)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _kernel[(triton.cdiv(n_groups, 4),)](x, q, scales, n_groups, FP8_MAX, GROUP=GROUP, BLOCK_G=4)
    return q, scales
