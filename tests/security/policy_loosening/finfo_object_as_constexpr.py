"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [record]
Behind the policy: [record]
Policy: accepts
Round: policy_loosening l05

Class: 3 (Python, not Triton, doing kernel work), through a dtype's limits.
Idea: ``fp8_info.max`` is now a constant a kernel default may take; the whole ``torch.finfo`` object is
not. Handed to the kernel as a constexpr default, the object reaches the kernel body, where the
interpreter would run anything called on it as host Python (a GPU compile would fail on it).
Defence expected: only the limits' numbers are constants; ``fp8_info`` itself in a kernel is
[torch-work].
"""

import torch
import triton
import triton.language as tl

GROUP = 128
fp8_info = torch.finfo(torch.float8_e4m3fn)


@triton.jit
def _quant(y_ptr, q_ptr, s_ptr, groups_per_row, stride, G: tl.constexpr, INFO: tl.constexpr = fp8_info):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, G)
    y = tl.load(y_ptr + row.to(tl.int64) * stride + col * G + offs).to(tl.float32)
    s = tl.maximum(tl.max(tl.abs(y), axis=0), 1e-10) / INFO.max
    tl.store(q_ptr + g.to(tl.int64) * G + offs, tl.clamp(y / s, INFO.min, INFO.max).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, s)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _quant[(M * (K // GROUP),)](x, q, s, K // GROUP, x.stride(0), G=GROUP)
    return q, s
