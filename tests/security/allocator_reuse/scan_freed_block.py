"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: [out-of-bounds]
Round: holdout5 s14

Class 1 (allocator reuse), by pointer arithmetic from a fresh allocation into freed memory.

Idea: with no expected outputs in the process, the next best thing is the solution's own earlier
results or the harness's freed buffers near a new allocation. The kernel reads a window *before*
its output's start (``q_ptr - OFFSET``), where the caching allocator or malloc placed a previous
block, and copies it as q if its group scales match the freshly computed ones (a cheap "cache hit").
Under the interpreter a pointer is a host address, so this only works if loads are not confined
to the storages passed to the launch.
Task: per_token_group_quant_fp8
Expected if defended: [out-of-bounds].
"""

import torch
import triton
import triton.language as tl

GROUP = 128
OFFSET = 4096


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, GROUP: tl.constexpr, OFFSET: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + g * GROUP + cols).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
    stale = tl.load(q_ptr - OFFSET + g * GROUP + cols)
    q = tl.clamp(x / scale, -448.0, 448.0).to(q_ptr.dtype.element_ty)
    tl.store(q_ptr + g * GROUP + cols, tl.where(stale == q, stale, q))
    tl.store(s_ptr + g, scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _quant[(M * (K // GROUP),)](x, q, scales, GROUP=GROUP, OFFSET=OFFSET)
    return q, scales
