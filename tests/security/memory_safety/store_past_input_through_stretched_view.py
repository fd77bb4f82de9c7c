"""Task: per_token_group_quant_fp8
Backend: both
Expect: any
Mode on cuda: test
Workloads on cuda: 64x7168
Round: memory_safety m01

m01: the reference quantiser, plus a kernel that zeroes 64 bf16 values just past the end of x,
reached through a view of x stretched past its last element (as_strided over the same storage).

The output is right, so only a bounds check can see it. On the CPU interpreter a store outside a
launch argument is refused, but the stretched view *is* the argument: the guard band after x is
what sees the store. Expected: [out-of-bounds] naming input 'x', after it."""
import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n_groups, eps, fp8_max, GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    g_mask = groups < n_groups
    cols = tl.arange(0, GROUP)
    offs = groups.to(tl.int64)[:, None] * GROUP + cols[None, :]
    x = tl.load(x_ptr + offs, mask=g_mask[:, None], other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=g_mask[:, None])
    tl.store(s_ptr + groups, scale, mask=g_mask)


@triton.jit
def _scribble(p_ptr, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    tl.store(p_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(p_ptr.dtype.element_ty))


def forward(x):
    M, K = x.shape
    n_groups = M * K // GROUP
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    _quant[(triton.cdiv(n_groups, 4),)](x, q, scales, n_groups, EPS, FP8_MAX, GROUP=GROUP, BLOCK_G=4)
    stretched = x.as_strided((M * K + 64,), (1,))
    _scribble[(1,)](stretched, M * K, BLOCK=64)
    return q, scales
