"""Task: every
Backend: interpreter
Expect: "phase 'replay' of workload" "exceeded its 3 s limit" | [output-type] | [record]
Mode: test
Limits: hang
Check: recovers
Round: redteam c19

THREATS class 19 (hangs): an endless loop inside a @triton.jit kernel (on the interpreter it spins in
Python; on a GPU it would never retire). The check phase's time limit must kill the process group
("exceeded its N s limit"), and the next evaluation must work.

A template: forward takes any task's inputs (*inputs), so it is tried on every registered task.
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


def forward(*inputs):
    scratch = torch.empty(16, dtype=torch.float32, device=inputs[0].device)
    _spin[(1,)](scratch, BLOCK=16)
    return inputs
