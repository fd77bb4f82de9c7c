'''Task: per_token_group_quant_fp8
Backend: cuda
Expect: paid
Policy: accepts
Round: holdout2 r31

False-positive probe: @triton.autotune with several configs and a key (the most common idiom).
Task: per_token_group_quant_fp8
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_G": 1}, num_warps=1), triton.Config({"BLOCK_G": 4}, num_warps=2)],
    key=["n_groups"],
)
@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n_groups, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    gm = groups < n_groups
    cols = tl.arange(0, 128)
    x = tl.load(x_ptr + groups[:, None] * 128 + cols[None, :], mask=gm[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10) / 448.0
    q = tl.clamp(x / scale[:, None], -448.0, 448.0)
    tl.store(q_ptr + groups[:, None] * 128 + cols[None, :], q.to(q_ptr.dtype.element_ty), mask=gm[:, None])
    tl.store(s_ptr + groups, scale, mask=gm)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    n = M * (K // 128)
    _quant[lambda meta: (triton.cdiv(n, meta["BLOCK_G"]),)](x, q, s, n)
    return q, s
