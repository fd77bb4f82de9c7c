"""Wrong: uses the e4m3fnuz range (240) instead of e4m3fn's 448, so every scale is off."""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    offs = g * GROUP + tl.arange(0, GROUP)
    x = tl.load(x_ptr + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 240.0
    q = tl.clamp(x / scale, -448.0, 448.0)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty(M, K // 128, dtype=torch.float32, device=x.device)
    _quant[(M * K // 128,)](x, q, scales, GROUP=128)
    return q, scales
