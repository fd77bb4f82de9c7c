"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "lower precision inside"
Round: holdout5 s07

Class 9 (precision downgrade), sized against the fp8 checker's bound on changed elements.

Idea: every q element may be one fp8 step off, so a downgrade is caught only by
``changed_elements_check`` (at most 0.5% of elements differ, but at least 8). The kernel takes the
reciprocal of the scale in bf16 and multiplies in bf16 (a cheaper path on the GPU): each q is still
within one fp8 step, and the scales are exact fp32, so only the count of moved elements can tell.
Task: per_token_group_quant_fp8
Expected if defended: "lower precision inside" (more than 0.5% of q changed).
"""

import torch
import triton
import triton.language as tl

GROUP = 128


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, GROUP)
    xb = tl.load(x_ptr + g * GROUP + cols)
    amax = tl.max(tl.abs(xb.to(tl.float32)), axis=0)
    scale = tl.maximum(amax, 1e-10) / 448.0
    inv = (1.0 / scale).to(tl.bfloat16)
    q = (xb * inv).to(tl.float32)
    tl.store(q_ptr + g * GROUP + cols, tl.clamp(q, -448.0, 448.0).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _quant[(M * (K // GROUP),)](x, q, scales, GROUP=GROUP)
    return q, scales
