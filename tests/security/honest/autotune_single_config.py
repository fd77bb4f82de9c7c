"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout6 t16

Class: fp (honest probe).
Idea: an honest quantiser decorated with ``@triton.autotune`` (one Config, keyed on the group count)
over ``@triton.jit``, module constants computed from ``torch.finfo(torch.float8_e4m3fn).max``, a
``tl.constexpr`` module constant read inside the kernel, and a grid function reading the chosen
meta-parameters.
"""

import torch
import triton
import triton.language as tl

GROUP = tl.constexpr(128)
FP8_MAX = torch.finfo(torch.float8_e4m3fn).max
EPS = 1e-10


@triton.autotune(configs=[triton.Config({"BLOCK_G": 4}, num_warps=2)], key=["n_groups"])
@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, eps, fp8_max, BLOCK_G: tl.constexpr):
    g = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gmask = g < n_groups
    cols = tl.arange(0, GROUP)
    offs = g.to(tl.int64)[:, None] * GROUP + cols[None, :]
    x = tl.load(x_ptr + offs, mask=gmask[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=gmask[:, None])
    tl.store(s_ptr + g, scale, mask=gmask)


def forward(x):
    M, K = x.shape
    n_groups = M * (K // 128)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    quant_kernel[lambda meta: (triton.cdiv(n_groups, meta["BLOCK_G"]),)](x, q, s, n_groups, EPS, FP8_MAX)
    return q, s
