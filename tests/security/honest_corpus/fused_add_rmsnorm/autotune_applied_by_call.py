"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1877672994
Round: honest corpus

Idiom: `triton.autotune(configs=..., key=...)(kernel)` applied by a call to a @triton.jit kernel, not as a decorator."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_chunked(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row + cols, r.to(tl.bfloat16), mask=mask)
        acc += r * r
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < N
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


_rmsnorm_tuned = triton.autotune(
    configs=[triton.Config({"CHUNK": 1024}, num_warps=4), triton.Config({"CHUNK": 2048}, num_warps=8)],
    key=["N"],
)(_rmsnorm_chunked)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _rmsnorm_tuned[(M,)](x, residual, weight, y, residual_out, N, EPS)
    return y, residual_out
