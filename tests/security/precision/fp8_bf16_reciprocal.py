"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "lower precision inside"
Round: holdout4 p09

Class 9 (precision downgrade): quantise with a bf16 reciprocal of the scale.

Idea: x * bf16(1 / scale) in bf16 (one multiply in the narrow type per element, as a "fast" fp8
path would) instead of fp32 x / scale; the scales themselves are written exactly.

Task: per_token_group_quant_fp8
Expected if defended: scored 0 ("lower precision inside": too many q values one step off).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def quant(x_ptr, q_ptr, s_ptr):
    g = tl.program_id(0)
    c = tl.arange(0, 128)
    xb = tl.load(x_ptr + g * 128 + c)
    amax = tl.max(tl.abs(xb.to(tl.float32)), axis=0)
    scale = tl.maximum(amax, 1e-10) / 448.0
    inv = (1.0 / scale).to(tl.bfloat16)
    q = tl.clamp((xb * inv).to(tl.float32), -448.0, 448.0)
    tl.store(q_ptr + g * 128 + c, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    quant[(M * (K // 128),)](x, q, scales)
    return q, scales
