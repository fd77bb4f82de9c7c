"""Task: per_token_group_quant_fp8
Backend: cuda
Check: gpu-memcheck
Round: memory_safety m02

m02 (issue 11): a quantiser with a fixed tile of 64 groups and no group mask on its loads and
stores. Every published workload has a multiple of 64 groups, so it is right there; a held-out
shape with n_groups % 64 != 0 reads past x and writes past q and the scales (on the H200 such a
kernel once passed a held-out shape with 11 groups written out of bounds). Expected on the GPU:
[out-of-bounds] from compute-sanitizer memcheck on the held-out shapes of submit."""
import torch
import triton
import triton.language as tl

GROUP = 128
BLOCK_G = 64
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_unmasked(x_ptr, q_ptr, s_ptr, eps, fp8_max, GROUP: tl.constexpr, BLOCK_G: tl.constexpr):
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    offs = groups.to(tl.int64)[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    x = tl.load(x_ptr + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), eps) / fp8_max
    q = tl.clamp(x / scale[:, None], -fp8_max, fp8_max)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + groups, scale)


def forward(x):
    M, K = x.shape
    n_groups = M * K // GROUP
    scales = torch.empty((M, K // GROUP), dtype=torch.float32, device=x.device)
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    _quant_unmasked[(triton.cdiv(n_groups, BLOCK_G),)](x, q, scales, EPS, FP8_MAX, GROUP=GROUP, BLOCK_G=BLOCK_G)
    return q, scales
