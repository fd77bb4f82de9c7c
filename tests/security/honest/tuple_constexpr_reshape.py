'''Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Round: holdout2 r34

False-positive probe: a tuple passed as a tl.constexpr, tl.reshape/tl.trans, tl.dot-free reshape.
Task: per_token_group_quant_fp8
Expected: accepted and correct.
'''
import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n_groups, SHAPE: tl.constexpr):
    BLOCK_G: tl.constexpr = SHAPE[0]
    GROUP: tl.constexpr = SHAPE[1]
    offs = tl.program_id(0) * BLOCK_G * GROUP + tl.arange(0, BLOCK_G * GROUP)
    x = tl.reshape(tl.load(x_ptr + offs).to(tl.float32), (BLOCK_G, GROUP))
    xt = tl.trans(x)
    scale = tl.maximum(tl.max(tl.abs(xt), axis=0), 1e-10) / 448.0
    q = tl.clamp(x / scale[:, None], -448.0, 448.0)
    tl.store(q_ptr + offs, tl.reshape(q, (BLOCK_G * GROUP,)).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G), scale)


def forward(x):
    M, K = x.shape
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((M, K // 128), dtype=torch.float32, device=x.device)
    n = M * (K // 128)
    _quant[(n,)](x, q, s, n, SHAPE=(1, 128))
    return q, s
