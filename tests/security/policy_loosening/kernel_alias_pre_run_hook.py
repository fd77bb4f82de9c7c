"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Behind the policy: [torch-work]
Policy: accepts
Round: policy_loosening l02

Class: 3 (the work in host torch, not a kernel), through a kernel alias.
Idea: host code may not touch a kernel's own API (``_touch.add_pre_run_hook`` is [introspection]), but
``kernel = _touch`` is an honest alias now, and reading the method off the alias gives the same
object. A pre-run hook runs inside the launch, where the run-time dispatch guard is paused for the
interpreted kernel body: the hook computes the whole fused add + RMSNorm with tensor operators (no
torch name the policy would see) and hands the outputs back through a list made in the call.
Defence expected: a kernel alias gets a kernel's attribute rules, [introspection]; behind it the
dispatch guard names pre-run hooks ([torch-work]).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(p):
    pass


def _rms(x, residual, weight):
    f32 = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    r = (x + f32) + residual
    ms = sum((r * r).T) / x.shape[1]
    y = (r.T * (ms + 1e-6) ** -0.5).T * weight
    return y.to(torch.bfloat16), r.to(torch.bfloat16)


def forward(x, residual, weight):
    box = []
    kernel = _touch
    add_hook = kernel.add_pre_run_hook
    add_hook(lambda *args, **kwargs: box.append(_rms(x, residual, weight)))
    kernel[(1,)](x)
    return box[-1]
