"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [no-kernel]
Mode: test
Round: redteam c03

THREATS class 3 (not writing a kernel): a correct-looking kernel is defined but forward never launches
it (it only calls it like a function, which is not a launch). The static launch graph must see that no
kernel[grid](...) is reachable from forward ([no-kernel]).
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
    tl.store(q_ptr + g * GROUP + cols, tl.clamp(x / scale, -448.0, 448.0).to(tl.float8e4nv))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    return q, s
