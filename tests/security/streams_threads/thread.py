"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: any
Mode: test
Round: redteam c04

THREATS class 4 (threads): run the kernel on a worker thread and return before it finishes, so the
work lands after the timer's end event. The static policy must refuse the import ([forbidden-import]).
"""

import threading

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def forward(x, residual, weight):
    y, r = torch.empty_like(x), torch.empty_like(x)
    worker = threading.Thread(target=lambda: _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024))
    worker.start()
    return y, r
