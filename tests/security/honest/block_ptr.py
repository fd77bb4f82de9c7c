'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout2 r33

False-positive probe: tl.make_block_ptr / tl.advance / boundary_check loads, a loop over chunks.
Task: fused_add_rmsnorm
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, M, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    xb = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0))
    rb = tl.make_block_ptr(r_ptr, shape=(M, N), strides=(N, 1), offsets=(row, 0), block_shape=(1, BLOCK), order=(1, 0))
    acc = tl.zeros([1, BLOCK], dtype=tl.float32)
    for _ in range(0, N, BLOCK):
        r = tl.load(xb, boundary_check=(1,), padding_option="zero").to(tl.float32) + \
            tl.load(rb, boundary_check=(1,), padding_option="zero").to(tl.float32)
        acc += r * r
        xb = tl.advance(xb, (0, BLOCK))
        rb = tl.advance(rb, (0, BLOCK))
    rstd = tl.rsqrt(tl.sum(acc) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < N
        r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
        tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rmsnorm[(M,)](x, residual, weight, y, ro, M, N, 1e-6, BLOCK=128)
    return y, ro
