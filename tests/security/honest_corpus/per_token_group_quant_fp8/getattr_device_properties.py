"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3366478450
Round: honest corpus

Idiom: getattr with a literal name and a default on the device properties (SM count) sizing a persistent grid."""

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_persistent(x_ptr, q_ptr, s_ptr, n_groups, groups_per_row, stride_xm, eps, fp8_max,
                      GROUP: tl.constexpr):
    offs = tl.arange(0, GROUP)
    for g in tl.range(tl.program_id(0), n_groups, tl.num_programs(0)):
        row = g // groups_per_row
        col = g - row * groups_per_row
        x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + offs).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
        q = tl.clamp(x / scale, -fp8_max, fp8_max)
        tl.store(q_ptr + g.to(tl.int64) * GROUP + offs, q.to(q_ptr.dtype.element_ty))
        tl.store(s_ptr + g, scale)


def _num_sms(device):
    props = torch.cuda.get_device_properties(device)
    return getattr(props, "multi_processor_count", 132)


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP
    n_groups = M * groups_per_row
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    grid = (max(1, min(n_groups, 8 * _num_sms(x.device))),)
    _quant_persistent[grid](x, q, scales, n_groups, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP,
                            num_warps=1)
    return q, scales
