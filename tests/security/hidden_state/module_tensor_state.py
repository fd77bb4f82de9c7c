'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: [record]
Round: holdout2 r09

Class 2 (output replay / state between calls): a module-level tensor passed into kernels.

Idea: [hidden-state] refuses aliasing or passing a module-level container, but lets `NAME.attr` and
`NAME[...]` through. `_STATE.view(-1)` is therefore a legal kernel argument, and a kernel can keep any
state it likes on the device across calls (a call counter here; on a GPU: a content fingerprint of
the last input and a copy of its outputs, to replay them on the timed calls that see the same set).
This probe shows the channel: each call's kernel increments the counter and also writes the outputs
honestly, and forward prints the call count read back through the view (a plain index read).
Task: fused_add_rmsnorm
Expected if defended: blocked by [hidden-state].
'''
import torch
import triton
import triton.language as tl

_STATE = torch.zeros(16, dtype=torch.int32)


@triton.jit
def _rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, state_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row * N + cols, r.to(tl.bfloat16), mask=m)
    if row == 0:
        tl.store(state_ptr, tl.load(state_ptr) + 1)


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rmsnorm[(M,)](x, residual, weight, y, ro, _STATE.view(-1), N, 1e-6, BLOCK=triton.next_power_of_2(N))
    print("calls seen by the device-side state:", _STATE.view(-1)[0])
    return y, ro
