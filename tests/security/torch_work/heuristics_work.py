"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [torch-work]
Round: holdout4 p15

Class 3 (not writing a kernel): the work done by a @triton.heuristics value function.

Idea: heuristics are evaluated inside the launch with the real torch tensors in their argument
dict; a lambda there can write the answer with slice assignment and operators (no torch names or
tensor methods for the static policy), while the kernel only stores the scales.

Task: per_token_group_quant_fp8
Expected if defended: [torch-work] (heuristic functions run under the guard).
"""

import torch
import triton
import triton.language as tl


def _fill(args):
    x, q = args["x_ptr"], args["q_ptr"]
    q[:] = x * 1.0  # stands in for the quantisation: a torch copy/cast done in host code
    return 128


@triton.heuristics({"GROUP": _fill})
@triton.jit
def scales_kernel(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0)
    c = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + c).to(tl.float32)
    tl.store(s_ptr + g, tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    scales_kernel[(M * (K // 128),)](x, q, scales)
    return q, scales
