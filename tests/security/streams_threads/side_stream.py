"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: "forward raised"
Expect on cuda: [torch-work]
Mode: test
Mode on cuda: benchmark
Round: redteam c04

THREATS class 4 (side streams): launch the kernel on a side stream that the timer's events do not
cover, and return at once. torch.cuda.Stream is on no allow-list: the static policy must refuse it
([torch-work]) on every backend.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


_SIDE = {}


def forward(x, residual, weight):
    if "stream" not in _SIDE:
        _SIDE["stream"] = torch.cuda.Stream()
    y, r = torch.empty_like(x), torch.empty_like(x)
    with torch.cuda.stream(_SIDE["stream"]):
        _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y, r
