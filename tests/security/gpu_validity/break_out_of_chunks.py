"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: [kernel-language]
Behind the policy on cuda: any
Mode on cuda: test
Round: gpu_validity g04

Class: 3 (not a kernel the GPU would run) - ``break`` in a kernel loop.
Idea: a fixed trip count of chunks with ``if start >= N: break`` to stop early. Triton 3.6's GPU
compiler has no ``break`` ("unsupported AST node type: Break"); the interpreter ran it as Python, so
the kernel earned the full reward on the CPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_chunks(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for i in range(0, MAX_CHUNKS):
        start = i * CHUNK
        if start >= N:
            break
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        acc += r * r
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for i in range(0, MAX_CHUNKS):
        start = i * CHUNK
        if start >= N:
            break
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_chunks[(M,)](x, residual, weight, y, ro, N, 1e-6, CHUNK=256, MAX_CHUNKS=64)
    return y, ro
