"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: [torch-work]
Round: holdout5 s05

Class 3 (not writing a kernel), hidden in the autotuner's config pruning.

Idea: Triton's autotuner calls ``prune_configs_by["early_config_prune"](configs, named_args)`` with
the launch's named arguments (the real tensors) before it launches. The guards wrap the autotuner's
bench (paused there) and heuristics, but the prune function is the solution's host code run from
inside ``Autotuner.run``. It does the whole computation with tensor operators and item assignment
into the output tensors it finds in ``named_args``; the kernel it then launches stores nothing.
Task: fused_add_rmsnorm
Expected if defended: [torch-work] (the dispatch guard sees the prune function's aten operators).
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


def _prune(configs, named_args, **kwargs):
    x, res, w = named_args["x_ptr"], named_args["r_ptr"], named_args["w_ptr"]
    y, ro = named_args["y_ptr"], named_args["ro_ptr"]
    M, N = x.shape
    xf = torch.empty((M, N), dtype=torch.float32, device=x.device)
    rf = torch.empty((M, N), dtype=torch.float32, device=x.device)
    wf = torch.empty((N,), dtype=torch.float32, device=x.device)
    xf[...] = x
    rf[...] = res
    wf[...] = w
    r = xf + rf
    rstd = (sum((r * r).t()) / N + EPS) ** -0.5
    y[...] = r * rstd.unsqueeze(1) * wf
    ro[...] = r
    return configs[:1]


@triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=["N"],
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _idle(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, B: tl.constexpr):
    pass


def forward(x, residual, weight):
    M, N = x.shape
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _idle[(1,)](x, residual, weight, y, ro, N)
    return y, ro
