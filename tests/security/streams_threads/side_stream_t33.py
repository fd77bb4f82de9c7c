"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Round: holdout6 t33

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

Class: 4 (side streams). GPU-only in effect.
Idea: the kernel is launched on a freshly created CUDA stream (the current stream never waits for
it), so on a GPU the timer's end event, recorded on the harness's stream, fires before the work is
done and the measured time is near zero; the outputs are complete by the time the harness
synchronises the device for the check. On the CPU there is no stream, so the values are right.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, y_ptr, r_out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(r_out_ptr + row + cols, r.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    r_out = torch.empty_like(x)
    side = torch.cuda.Stream() if x.is_cuda else None
    with torch.cuda.stream(side):
        _kernel[(M,)](x, residual, weight, y, r_out, N, EPS, BLOCK=triton.next_power_of_2(N))
    return y, r_out
