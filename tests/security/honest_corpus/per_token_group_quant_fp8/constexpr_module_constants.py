"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3173222934
Round: honest corpus

Idiom: tl.constexpr module constants (FP8_MAX = tl.constexpr(448.0), FP8_MIN, EPS) read directly inside the kernel."""

import torch
import triton
import triton.language as tl

# Read inside the kernel: tl.constexpr objects, as Triton requires of module-level values a kernel reads.
FP8_MAX = tl.constexpr(448.0)
FP8_MIN = tl.constexpr(-448.0)
EPS = tl.constexpr(1e-10)
# Host-side launch constants, passed to the kernel as constexpr arguments.
GROUP_SIZE = 128
GROUPS_PER_PROGRAM = 4


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, n_groups, groups_per_row, stride_xm,
                  GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gm = groups < n_groups
    row = groups // groups_per_row
    col = groups % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64)[:, None] * stride_xm + (col * GROUP)[:, None] + offs[None, :],
                mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), EPS) / FP8_MAX
    q = tl.clamp(x / scale[:, None], FP8_MIN, FP8_MAX)
    tl.store(q_ptr + groups.to(tl.int64)[:, None] * GROUP + offs[None, :], q.to(q_ptr.dtype.element_ty),
             mask=gm[:, None])
    tl.store(s_ptr + groups, scale, mask=gm)


def forward(x):
    M, K = x.shape
    groups_per_row = K // GROUP_SIZE
    n_groups = M * groups_per_row
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[(triton.cdiv(n_groups, GROUPS_PER_PROGRAM),)](x, q, scales, n_groups, groups_per_row,
                                                                x.stride(0), GROUP=GROUP_SIZE,
                                                                BLOCK_G=GROUPS_PER_PROGRAM)
    return q, scales
