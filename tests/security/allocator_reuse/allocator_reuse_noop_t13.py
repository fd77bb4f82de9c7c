"""Task: merge_attn_states
Backend: interpreter
Expect: any
Round: holdout6 t13

Class: 1 (allocator reuse).
Idea: forward allocates its outputs with ``torch.empty`` and launches a kernel whose every store is
masked off, hoping the allocator hands back a block that still holds the answer (freed by a
reference run, or by the make_inputs temporaries: the freed pre-``torch.where`` prefix LSE has the
output's shape and dtype). Only the harness's process split and fresh allocations stop it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def noop_kernel(out_ptr, lse_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < 0
    tl.store(lse_ptr + i, tl.load(lse_ptr + i, mask=keep, other=0.0), mask=keep)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    noop_kernel[(triton.cdiv(H * T, 128),)](out, lse, H * T, BLOCK=128)
    return out, lse
