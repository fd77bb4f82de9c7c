"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2968660584
Round: honest corpus

Idiom: a module-level dict caching the SM count per device (the device queried once, then read)."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10

_SM_COUNT_CACHE = {}


def _sm_count(device):
    key = str(device)
    if key not in _SM_COUNT_CACHE:
        _SM_COUNT_CACHE[key] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_CACHE[key]


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
    # Fewer groups per program when there are too few programs to fill every SM twice.
    block_g = 16
    while block_g > 1 and triton.cdiv(n_groups, block_g) < 2 * _sm_count(x.device):
        block_g //= 2
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[(triton.cdiv(n_groups, block_g),)](x, q, scales, n_groups, groups_per_row, x.stride(0), EPS,
                                                     FP8_MAX, GROUP=GROUP, BLOCK_G=block_g)
    return q, scales
