"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Mode: test
Workloads: all
Round: redteam (honest, slow)

Honest but slow: one program per row, looping over the row's groups one after another (no parallelism
across groups of a row). Must PASS every workload (no false positive).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _quant_row(x_ptr, q_ptr, s_ptr, K, stride_xm, GROUP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, GROUP)
    n_groups = K // GROUP
    for g in range(0, n_groups):
        x = tl.load(x_ptr + row * stride_xm + g * GROUP + cols).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
        q = tl.clamp(x / scale, -448.0, 448.0)
        tl.store(q_ptr + row * K + g * GROUP + cols, q.to(q_ptr.dtype.element_ty))
        tl.store(s_ptr + row * n_groups + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant_row[(M,)](x, q, s, K, x.stride(0), GROUP=128)
    return q, s
