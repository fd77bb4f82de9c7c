"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: paid
Behind the policy on cuda: any
Round: holdout6 t01

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

Class: 2 (output replay / caching / hidden state).
Idea: the module-level container is a dict whose *item* is a list; forward reads the item with the
read-only ``STATE.get("outs")`` (allowed) into a local name and then appends to that local, which the
policy treats as a local container. Outputs are replayed for inputs seen before (keyed by pointers and
shape), so on the GPU the repeated timed calls of a set would cost nothing.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6
STATE = {"outs": []}


@triton.jit
def rms_kernel(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    r = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, r.to(ro_ptr.dtype.element_ty), mask=mask)


def forward(x, residual, weight):
    M, N = x.shape
    key = (x.data_ptr(), residual.data_ptr(), weight.data_ptr(), M, N)
    memo = STATE.get("outs")
    for seen, y_old, ro_old in memo:
        if seen == key:
            rms_kernel[(1,)](x, residual, weight, y_old, ro_old, N, EPS, BLOCK=16)  # a token launch
            return y_old, ro_old
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    rms_kernel[(M,)](x, residual, weight, y, ro, N, EPS, BLOCK=triton.next_power_of_2(N))
    memo.append((key, y, ro))
    return y, ro
