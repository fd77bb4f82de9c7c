"""Task: fused_add_rmsnorm
Backend: cuda
Expect: [torch-work]
Behind the policy: [side-stream]
Policy: accepts
Mode on cuda: benchmark
Round: redteam c04

THREATS class 4 (side streams), past the static policy: the policy follows `t = torch` assignments,
but not other bindings -- a walrus expression (t := torch), a for-loop target, a default argument -- so
t.cuda.Stream() is not recognised as torch.cuda.Stream. The kernel runs on a side stream that the
timer's end event does not wait for. Statically it should be refused ([torch-work]); on a GPU the
roofline floor bounds what the hidden work can gain ([below-roofline]).
"""

import torch
import triton
import triton.language as tl

_SIDE = {}


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    if "stream" not in _SIDE:
        _SIDE["stream"] = (t := torch).cuda.Stream()
        _SIDE["enter"] = t.cuda.stream
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    with _SIDE["enter"](_SIDE["stream"]):
        _rmsnorm_rows[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, r
