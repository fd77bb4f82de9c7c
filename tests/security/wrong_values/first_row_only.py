"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "outside atol" | "contains NaN" | "infinities differ" | "scales differ" | "more than one fp8 step" | "more than one bfloat16 step" | [degenerate]
Mode: test
Round: redteam c10

THREATS class 10 (degenerate output): quantise only the first row (the row a spot check might look
at) and leave the rest of the outputs as allocated. Every element is compared: the scales (or q) of the
other rows are wrong.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
    tl.store(q_ptr + g * GROUP + cols, tl.clamp(x / scale, -448.0, 448.0).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant[(K // 128,)](x, q, s, GROUP=128)
    return q, s
