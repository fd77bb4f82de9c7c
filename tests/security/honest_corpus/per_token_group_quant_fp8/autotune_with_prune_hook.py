"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1599157605
Round: honest corpus

Idiom: @triton.autotune over several configs with an early_config_prune hook dropping configs too big for the input."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


def _prune(configs, named_args, **kwargs):
    n_groups = named_args["n_groups"]
    kept = [c for c in configs if c.kwargs["BLOCK_G"] <= max(1, n_groups)]
    return kept or configs[:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK_G": g}, num_warps=w) for g, w in ((1, 1), (4, 1), (8, 2), (16, 4))],
    key=["n_groups"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, groups_per_row, stride_xm, eps, fp8_max,
                  GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gm = groups < n_groups
    row = groups // groups_per_row
    col = groups % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64)[:, None] * stride_xm + (col * GROUP)[:, None] + offs[None, :],
                mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + groups.to(tl.int64)[:, None] * GROUP + offs[None, :], q.to(q_ptr.dtype.element_ty),
             mask=gm[:, None])
    tl.store(s_ptr + groups, scale, mask=gm)


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP
    n_groups = M * groups_per_row
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    grid = lambda meta: (triton.cdiv(n_groups, meta["BLOCK_G"]),)  # noqa: E731
    _quant_kernel[grid](x, q, scales, n_groups, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP)
    return q, scales
