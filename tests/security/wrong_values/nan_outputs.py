'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: "contains NaN"
Round: holdout2 r20

Class 10/6: NaN and constant outputs from a real kernel (does the checker ever let NaN pass?).

Idea: y is all NaN (0/0 in the kernel) and residual_out is computed honestly; the default checker
must refuse NaN anywhere.
Task: fused_add_rmsnorm
Expected if defended: blocked ("y: contains NaN").
'''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, r_ptr, y_ptr, ro_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    z = r * 0.0
    tl.store(y_ptr + row * N + cols, (z / z).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _k[(M,)](x, residual, y, ro, N, BLOCK=triton.next_power_of_2(N))
    return y, ro
