"""Task: merge_attn_states
Backend: interpreter
Expect: [input-mutation]
Mode: test
Round: redteam c08

THREATS class 8 (input mutation): a kernel zeroes the inputs and the outputs are zeros, hoping the
checker compares against a baseline run on the same (now zeroed) inputs. Inputs are compared with
untouched copies after the call ([input-mutation]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _zero(p_ptr, s_ptr, out_ptr, n, lse_ptr, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK], dtype=tl.float32)
    tl.store(p_ptr + offs, zero.to(tl.bfloat16), mask=offs < n)
    tl.store(s_ptr + offs, zero.to(tl.bfloat16), mask=offs < n)
    tl.store(out_ptr + offs, zero.to(tl.bfloat16), mask=offs < n)
    tl.store(lse_ptr + offs, zero, mask=offs < m)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    n = prefix_out.numel()
    _zero[(triton.cdiv(n, 1024),)](prefix_out, suffix_out, out, n, lse, lse.numel(), BLOCK=1024)
    return out, lse
