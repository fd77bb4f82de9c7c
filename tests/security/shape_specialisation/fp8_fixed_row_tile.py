"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: any
Round: holdout5 s08

Class 12 (shape specialisation): one program per row holding a fixed [64, 128] tile.

Idea: every published workload and smoke shape has at most 64 groups per row (K <= 8192), so a
kernel that loads one row as a single [64, 128] tile, masked to the row's groups, passes all of
them with one program per row and no loop. Groups past the 64th are silently never written (the
outputs come from torch.empty). The task's held-out draw includes a shape with 65-72 groups per
row on the interpreter (65-128 on the GPU).
Task: per_token_group_quant_fp8
Expected if defended: a failing held-out workload (groups past 64 left unwritten).
"""

import torch
import triton
import triton.language as tl

GROUP = 128
TILE_G = 64


@triton.jit
def _quant_row(x_ptr, q_ptr, s_ptr, G, GROUP: tl.constexpr, TILE_G: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    gs = tl.arange(0, TILE_G)
    cols = tl.arange(0, GROUP)
    gm = gs < G
    offs = row * G * GROUP + gs[:, None] * GROUP + cols[None, :]
    x = tl.load(x_ptr + offs, mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10) / 448.0
    q = tl.clamp(x / scale[:, None], -448.0, 448.0)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=gm[:, None])
    tl.store(s_ptr + row * G + gs, scale, mask=gm)


def forward(x):
    M, K = x.shape
    G = K // GROUP
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, G), dtype=torch.float32, device=x.device)
    _quant_row[(M,)](x, q, scales, G, GROUP=GROUP, TILE_G=TILE_G)
    return q, scales
