'''Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Behind the policy: "pre-run hooks"
Round: holdout2 r11

Class 5/3: host code inside a launch through the interpreter's pre-run hooks.

Idea: InterpretedFunction.add_pre_run_hook(fn) makes GridExecutor call fn(*args_hst) inside the
launch, where the torch guard is paused; the hook (reached as a bound method, not a call of a
tensor method) would do the work in torch ops on the host copies.
Task: fused_add_rmsnorm
Expected if defended: blocked at run time ("pre-run hooks on a kernel").
'''
import torch
import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr):
    tl.load(w_ptr)


def _f32(t):
    conv = t.to
    return conv(torch.float32)


def _hook(x, r, w, y, ro):
    rr = _f32(x) + _f32(r)
    down = rr.to
    cp = ro.copy_
    cp(down(torch.bfloat16))
    mean = (rr * rr).mean
    rs = (mean(-1, keepdim=True) + 1e-6).rsqrt
    yy = (rr * rs() * _f32(w)).to
    cpy = y.copy_
    cpy(yy(torch.bfloat16))


_noop.add_pre_run_hook(_hook)


def forward(x, residual, weight):
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _noop[(1,)](x, residual, weight, y, ro)
    return y, ro
