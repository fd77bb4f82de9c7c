"""Task: per_token_group_quant_fp8
Backend: both
Expect on interpreter: [gpu-compile]
Behind the policy on cuda: any
Mode on cuda: test
Round: gpu_validity g03

Class: 3 (not a kernel the GPU would run) - Python control flow on a block tensor.
Idea: each program quantises a [BLOCK_G, 128] tile of groups and branches with ``if amax > 0:`` on
the vector of the tile's group maxima. Triton's GPU compiler refuses it ("Boolean value of Tensor
with more than one value is ambiguous"); the stock interpreter took the first branch (a block's truth
value was True), which happens to be right for every group, and the kernel earned the full reward.
"""

import torch
import triton
import triton.language as tl

FP8_MAX = tl.constexpr(448.0)


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n_groups, GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0).to(tl.int64) * BLOCK_G + tl.arange(0, BLOCK_G)
    g_mask = groups < n_groups
    cols = tl.arange(0, GROUP)
    offs = groups[:, None] * GROUP + cols[None, :]
    x = tl.load(x_ptr + offs, mask=g_mask[:, None], other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    if amax > 0:
        scale = tl.maximum(amax, 1e-10) / FP8_MAX
    else:
        scale = tl.full([BLOCK_G], 1e-10, tl.float32) / FP8_MAX
    tl.store(s_ptr + groups, scale, mask=g_mask)
    q = tl.clamp(x / scale[:, None], -FP8_MAX, FP8_MAX)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=g_mask[:, None])


def forward(x):
    M, K = x.shape
    n_groups = M * (K // 128)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    _quant[(triton.cdiv(n_groups, 4),)](x, q, s, n_groups, GROUP=128, BLOCK_G=4)
    return q, s
