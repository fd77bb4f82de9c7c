"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3237558729
Round: honest corpus

Idiom: @triton.autotune over several configs (chunk width, warps) keyed on the row width."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.autotune(
    configs=[
        triton.Config({"CHUNK": 1024}, num_warps=4),
        triton.Config({"CHUNK": 2048}, num_warps=8),
        triton.Config({"CHUNK": 4096}, num_warps=16),
        triton.Config({"CHUNK": 512}, num_warps=2),
    ],
    key=["N"],
)
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
        # Recomputed in fp32 from the inputs: normalising the bf16-rounded residual would round twice.
        r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _rmsnorm_chunked[(M,)](x, residual, weight, y, residual_out, N, EPS)
    return y, residual_out
