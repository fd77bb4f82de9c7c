"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 740981646
Round: honest corpus

Idiom: a module-level dict caching the block size and warp count, keyed by (width, device)."""

import torch
import triton
import triton.language as tl

EPS = 1e-6
_LAUNCH_CACHE = {}


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    r = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + offs, r.to(tl.bfloat16), mask=mask)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + offs, (r * rstd * w).to(tl.bfloat16), mask=mask)


def _launch_config(n_cols, device):
    key = (n_cols, str(device))
    cfg = _LAUNCH_CACHE.get(key)
    if cfg is None:
        block = triton.next_power_of_2(n_cols)
        cfg = (block, max(1, min(16, block // 256)))
        _LAUNCH_CACHE[key] = cfg
    return cfg


def forward(x, residual, weight):
    M, N = x.shape
    block, num_warps = _launch_config(N, x.device)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _kernel[(M,)](x, residual, weight, y, residual_out, N, EPS, BLOCK=block, num_warps=num_warps)
    return y, residual_out
