"""Task: merge_attn_states
Backend: interpreter
Expect: [degenerate]
Mode: test
Round: redteam c10

THREATS class 10 (degenerate output): fill both outputs with a plausible constant (0 for the merged
values, 5.0 for the LSEs, the mean of the inputs' distribution). A constant where the expected output
varies is [degenerate].
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill(out_ptr, n, lse_ptr, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(tl.bfloat16), mask=offs < n)
    tl.store(lse_ptr + offs, tl.full([BLOCK], 5.0, tl.float32), mask=offs < m)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _fill[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), lse, lse.numel(), BLOCK=1024)
    return out, lse
