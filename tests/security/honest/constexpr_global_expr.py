'''Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout2 r36

False-positive probe: module constants that are expressions (FP8_MAX = float(...), 1 / 448.0,
tl.constexpr(2 ** 7)) read inside the kernel, a do_not_specialize jit option, the "other" keyword.
Task: per_token_group_quant_fp8
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl

GROUP = tl.constexpr(2 ** 7)
FP8_MAX = tl.constexpr(448.0)
INV_FP8_MAX = 1.0 / FP8_MAX


@triton.jit(do_not_specialize=["n_groups"])
def _quant(x_ptr, q_ptr, s_ptr, n_groups, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gm = groups < n_groups
    cols = tl.arange(0, GROUP)
    x = tl.load(x_ptr + groups[:, None] * GROUP + cols[None, :], mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10) * INV_FP8_MAX
    q = tl.clamp(x / scale[:, None], -FP8_MAX, FP8_MAX)
    tl.store(q_ptr + groups[:, None] * GROUP + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=gm[:, None])
    tl.store(s_ptr + groups, scale, mask=gm)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    n = M * (K // 128)
    _quant[(triton.cdiv(n, 2),)](x, q, s, n, BLOCK_G=2)
    return q, s
