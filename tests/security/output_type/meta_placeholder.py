"""Task: merge_attn_states
Backend: interpreter
Expect: any
Round: holdout4 p11

Class 7 (lazy/placeholder outputs): return tensors on the meta device.

Idea: meta tensors have the right type (exactly torch.Tensor), dtype, shape and contiguity, and
cost nothing to "fill"; a harness that checked only the contract before comparing lazily, or that
moved outputs with a tolerant copy, would accept them. A real kernel runs (on a scratch buffer) so
the launch counter sees work.

Task: merge_attn_states
Expected if defended: scored 0 (outputs on the wrong device: the run raises or the contract fails).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def scratch(buf_ptr):
    tl.store(buf_ptr + tl.arange(0, 16), tl.zeros([16], dtype=tl.float32))


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    buf = torch.empty((16,), dtype=torch.float32, device=prefix_out.device)
    scratch[(1,)](buf)
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device="meta")
    lse = torch.empty((H, T), dtype=torch.float32, device="meta")
    return out, lse
