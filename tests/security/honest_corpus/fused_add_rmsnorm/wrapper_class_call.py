"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 4042747982
Round: honest corpus

Idiom: a small op class holding its launch parameters (set in `__init__`) and launching from `__call__`; forward calls a module-level instance."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, r.to(tl.bfloat16), mask=mask)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


class FusedAddRMSNorm:
    """Fused residual add + RMSNorm, configured once."""

    def __init__(self, eps=1e-6, max_warps=16):
        self.eps = eps
        self.max_warps = max_warps

    def num_warps(self, block_n):
        return max(1, min(self.max_warps, block_n // 256))

    def __call__(self, x, residual, weight):
        M, N = x.shape
        y = torch.empty_like(x)
        residual_out = torch.empty_like(x)
        BLOCK_N = triton.next_power_of_2(N)
        _rmsnorm_kernel[(M,)](x, residual, weight, y, residual_out, N, self.eps, BLOCK_N=BLOCK_N,
                              num_warps=self.num_warps(BLOCK_N))
        return y, residual_out


_op = FusedAddRMSNorm(eps=1e-6)


def forward(x, residual, weight):
    return _op(x, residual, weight)
