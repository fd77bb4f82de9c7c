"""Task: fused_add_rmsnorm
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1008289925
Round: honest corpus

Idiom: functools.lru_cache on a pure config picker (block size and warps from the row width)."""

import functools

import torch
import triton
import triton.language as tl

EPS = 1e-6
MAX_FUSED_SIZE = 65536


@functools.lru_cache(maxsize=None)
def _pick_config(n_cols):
    block = triton.next_power_of_2(n_cols)
    if block > MAX_FUSED_SIZE:
        raise ValueError(f"rows of {n_cols} elements do not fit one block")
    if block >= 8192:
        num_warps = 16
    elif block >= 2048:
        num_warps = 8
    elif block >= 1024:
        num_warps = 4
    else:
        num_warps = 2
    return block, num_warps


@triton.jit
def _add_rmsnorm_fwd(x_ptr, r_ptr, w_ptr, y_ptr, r_out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    base = pid * n_cols
    h = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(r_out_ptr + base + offs, h.to(r_out_ptr.dtype.element_ty), mask=m)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    g = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + base + offs, (h * rstd * g).to(y_ptr.dtype.element_ty), mask=m)


def forward(x, residual, weight):
    n_rows, n_cols = x.shape
    block, num_warps = _pick_config(n_cols)
    y = torch.empty_like(x)
    residual_out = torch.empty_like(x)
    _add_rmsnorm_fwd[(n_rows,)](x, residual, weight, y, residual_out, n_cols, EPS, BLOCK=block,
                                num_warps=num_warps)
    return y, residual_out
