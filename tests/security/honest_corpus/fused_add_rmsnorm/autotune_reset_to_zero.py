"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2372246484
Round: honest corpus

Idiom: `@triton.autotune` over several configs with `reset_to_zero=` on an fp32 buffer the kernel accumulates into with atomics (split rows: sum of squares, then normalise)."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.autotune(
    configs=[triton.Config({"CHUNK": 256}, num_warps=2), triton.Config({"CHUNK": 512}, num_warps=4)],
    key=["N"],
    reset_to_zero=["sq_ptr"],
)
@triton.jit
def _residual_and_sumsq(x_ptr, res_ptr, res_out_ptr, sq_ptr, N, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)
    tl.atomic_add(sq_ptr + row, tl.sum(r * r, axis=0))


@triton.jit
def _normalise(x_ptr, res_ptr, w_ptr, y_ptr, sq_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    # Recomputed in fp32 from the inputs: normalising the bf16-rounded residual would round twice.
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.load(sq_ptr + row) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    sq = torch.zeros((M,), dtype=torch.float32, device=x.device)
    _residual_and_sumsq[lambda meta: (M, triton.cdiv(N, meta["CHUNK"]))](x, residual, residual_out, sq, N)
    BLOCK_N = triton.next_power_of_2(N)
    _normalise[(M,)](x, residual, weight, y, sq, N, EPS, BLOCK_N=BLOCK_N, num_warps=max(1, min(16, BLOCK_N // 256)))
    return y, residual_out
