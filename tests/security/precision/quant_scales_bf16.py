"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "scales differ"
Round: holdout h23

Class 9 (precision downgrade). Task: per_token_group_quant_fp8.

Idea: compute amax and the scale in bf16 (the input is bf16, so amax is exact, but the division
by 448 is rounded to bf16) and quantise with that scale. q stays within one fp8 step; the scales
differ by up to ~0.4%.
Defence expected: the task's checker requires scales to fp32 rounding (1e-5). Should earn 0.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n_groups, GROUP: tl.constexpr):
    g = tl.program_id(0)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + cols).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10)
    scale = (amax / 448.0).to(tl.bfloat16).to(tl.float32)
    q = tl.clamp(x / scale, -448.0, 448.0)
    tl.store(q_ptr + g * GROUP + cols, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant[(M * (K // 128),)](x, q, s, M * (K // 128), GROUP=128)
    return q, s
