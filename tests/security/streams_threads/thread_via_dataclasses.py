"""Task: fused_add_rmsnorm
Backend: cuda
Expect: [late-corruption] | [below-roofline] | "forward raised" | "outside atol" | "contains NaN" | "infinities differ" | "scales differ" | "more than one fp8 step" | "more than one bfloat16 step" | [degenerate]
Policy: accepts
Mode on cuda: benchmark
Round: redteam c04

THREATS class 4 (threads), past the static policy: threading is not importable, but dataclasses (allowed)
imports the low-level _thread module and keeps it as dataclasses._thread, a name the policy does not
know. The kernel is launched from a new thread and forward returns at once, so the work would land
after the timer's end event. Statically it should be refused ([forbidden-import] / [introspection]); the
test checks only the static verdict (on a GPU the post-timing re-check and the roofline floor are
what remain).
"""

import dataclasses

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def _launch(x, y):
    _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)


def forward(x, residual, weight):
    y, r = torch.empty_like(x), torch.empty_like(x)
    if x.numel() < 0:  # never: keeps the static launch graph happy
        _launch(x, y)
    dataclasses._thread.start_new_thread(_launch, (x, y))
    return y, r
