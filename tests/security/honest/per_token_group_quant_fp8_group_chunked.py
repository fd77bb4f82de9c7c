"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Mode: test
Workloads: all
Round: redteam (honest, slow)

Honest but slow: one program per 128-value group, two passes over it in 32-wide chunks (amax, then
scale, clamp and cast). Must PASS every workload (no false positive).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant_group(x_ptr, q_ptr, s_ptr, groups_per_row, stride_xm, GROUP: tl.constexpr, CHUNK: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    x_base = row.to(tl.int64) * stride_xm + (g - row * groups_per_row).to(tl.int64) * GROUP
    amax = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, GROUP, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        amax = tl.maximum(amax, tl.abs(tl.load(x_ptr + x_base + cols).to(tl.float32)))
    scale = tl.maximum(tl.max(amax, axis=0), 1e-10) / 448.0
    for start in range(0, GROUP, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + x_base + cols).to(tl.float32)
        q = tl.clamp(x / scale, -448.0, 448.0)
        tl.store(q_ptr + g.to(tl.int64) * GROUP + cols, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant_group[(M * (K // 128),)](x, q, s, K // 128, x.stride(0), GROUP=128, CHUNK=32)
    return q, s
