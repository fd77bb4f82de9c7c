'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout2 r37

False-positive probe: torch.zeros accumulator (allowed), a dict of launch parameters splatted into
the launch, x.stride() arguments, tl.cdiv/tl.num_programs in a persistent loop.
Task: fused_add_rmsnorm
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N, stride_m, eps, BLOCK: tl.constexpr):
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        cols = tl.arange(0, BLOCK)
        m = cols < N
        r = tl.load(x_ptr + row * stride_m + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * stride_m + cols, mask=m, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_m + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
        tl.store(ro_ptr + row * stride_m + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.zeros_like(x)
    ro = torch.empty_like(x)
    cfg = {"BLOCK": triton.next_power_of_2(N), "num_warps": 4}
    _rmsnorm[(min(M, 4),)](x, residual, weight, y, ro, M, N, x.stride(0), 1e-6, **cfg)
    return y, ro
