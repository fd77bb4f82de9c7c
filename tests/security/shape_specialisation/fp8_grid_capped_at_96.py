"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: "held-out"
Check: held-out-only
Round: heldout_coverage h05

Class 12 (shape specialisation): a grid capped at a constant read off the held-out range.

Idea: the prompt said the interpreter's held-out shapes have "48 to 96 rows" (and up to 3 rows for
the wide one), so one program per row, at most 96 of them, covers every smoke workload and every
held-out shape the draw could make; rows from the 97th on keep what torch.empty left. Paid on every
submission while the draw stopped at 96 rows; it now has a shape with 97 to 192.
"""

import torch
import triton
import triton.language as tl

MAX_ROWS = 96
FP8_MAX = tl.constexpr(448.0)


@triton.jit
def _quant_row(x_ptr, q_ptr, s_ptr, K, GROUP: tl.constexpr, GROUPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    groups = tl.arange(0, GROUPS)
    g_mask = groups < K // GROUP
    offs = row * K + groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    x = tl.load(x_ptr + offs, mask=g_mask[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10) / FP8_MAX
    tl.store(s_ptr + row * (K // GROUP) + groups, scale, mask=g_mask)
    q = tl.clamp(x / scale[:, None], -FP8_MAX, FP8_MAX)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=g_mask[:, None])


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant_row[(min(M, MAX_ROWS),)](x, q, s, K, GROUP=128, GROUPS=triton.next_power_of_2(K // 128))
    return q, s
