"""Task: every
Backend: interpreter
Expect: "phase 'check' of workload" "exceeded its 10 s limit"
Mode: test
Limits: short
Check: recovers
Round: redteam c19

THREATS class 19 (hangs): an endless loop inside a @triton.jit kernel (on the interpreter it spins in
Python; on a GPU it would never retire). The check phase's time limit must kill the process group
("exceeded its N s limit"), and the next evaluation must work.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(out_ptr, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    while i >= 0:
        i += 1
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < i)


def forward(prefix_out, prefix_lse, suffix_out, suffix_lse):
    T, H, d = prefix_out.shape
    out = torch.empty((T, H, d), dtype=prefix_out.dtype, device=prefix_out.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=prefix_out.device)
    _spin[(1,)](lse, BLOCK=16)
    return out, lse
