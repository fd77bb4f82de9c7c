"""Block-scaled fp8 GEMM (w8a8): 1x128 activation scales, 128x128 weight scales, bf16 output."""

import torch

from d2k_env.tasks import (AccumulationBound, DesignProperty, Heldout, Output, Roofline, TaskSpec, UsesDot, Workload,
                           WrongSolution)

SOURCES = [
    "vLLM vllm/model_executor/layers/quantization/utils/fp8_utils.py (w8a8_block_fp8_matmul)",
    "SGLang python/sglang/srt/layers/quantization/fp8_kernel.py (w8a8_block_fp8_matmul)",
    "DeepSeek-V3 technical report: fine-grained fp8 quantisation with 1x128 / 128x128 scales",
]
BLOCK = 128
FP8_MAX = 448.0
EPS = 1e-10
DESCRIPTION = f"""
Inputs (K a multiple of {BLOCK}; N need not be):
    a        [M, K] float8_e4m3fn   activations, quantised per token in groups of {BLOCK} along K
    a_scales [M, K/{BLOCK}] fp32     one scale per (row, {BLOCK}-column group) of a
    b        [N, K] float8_e4m3fn   weights (the linear layer's [out, in] layout)
    b_scales [ceil(N/{BLOCK}), K/{BLOCK}] fp32   one scale per {BLOCK}x{BLOCK} block of b
The dequantised operands are A[m, k] = a[m, k] * a_scales[m, k // {BLOCK}] and
B[n, k] = b[n, k] * b_scales[n // {BLOCK}, k // {BLOCK}]. Return C = A @ B^T [M, N] bfloat16, the exact
sum rounded once (any order of summation with fp32 partial sums; scaling each {BLOCK}-wide K partial
product by the outer product of its scales is exact up to fp32 rounding). Activation scales span many
orders of magnitude, and all-zero (padding) rows have a tiny scale and all-zero codes.
"""

WORKLOADS = [
    Workload("4096x24576x1536", {"M": 4096, "N": 24576, "K": 1536}),
    Workload("4096x7168x16384", {"M": 4096, "N": 7168, "K": 16384}),
    Workload("64x7168x18432", {"M": 64, "N": 7168, "K": 18432}),
    Workload("16384x36864x7168", {"M": 16384, "N": 36864, "K": 7168}),
]
# Ragged M and N (tails in both tile directions, N not a multiple of the scale block) and several K blocks.
SMOKE_WORKLOADS = [
    Workload("5x200x384", {"M": 5, "N": 200, "K": 384}),
    Workload("150x72x256", {"M": 150, "N": 72, "K": 256}),
]


def _quantise_rows(x, device):
    """Per-row groups of BLOCK: (fp8 codes, fp32 scales), as per_token_group_quant_fp8 makes them."""
    rows, K = x.shape
    g = x.view(rows, K // BLOCK, BLOCK)
    scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=EPS) / FP8_MAX
    q = (g / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(rows, K), scale.view(rows, K // BLOCK)


def make_inputs(w, gen, device):
    M, N, K = w["M"], w["N"], w["K"]
    kb, nb = K // BLOCK, -(-N // BLOCK)
    # Activations: group magnitudes over four orders of magnitude, some outliers, and about one row
    # in 16 all zero (padding tokens), one at least when there are several rows.
    x = torch.randn(M, kb, BLOCK, generator=gen, device=device)
    x = x * torch.exp(2.0 * torch.randn(M, kb, 1, generator=gen, device=device))
    x = torch.where(torch.rand(M, kb, BLOCK, generator=gen, device=device) < 0.002, 20.0 * x, x)
    if M > 1:
        zero = torch.rand(M, 1, 1, generator=gen, device=device) < 1 / 16
        zero[torch.randint(M, (1,), generator=gen, device=device)] = True
        x = x.masked_fill(zero, 0.0)
    a, a_scales = _quantise_rows(x.view(M, K), device)
    # Weights: 128x128 blocks whose magnitudes differ by up to two orders of magnitude around 0.02.
    wt = torch.randn(nb, BLOCK, kb, BLOCK, generator=gen, device=device)
    wt = wt * (0.02 * torch.exp(torch.randn(nb, 1, kb, 1, generator=gen, device=device)))
    blocks = wt.permute(0, 2, 1, 3)  # [nb, kb, BLOCK rows, BLOCK cols]
    b_scales = blocks.abs().amax(dim=(-1, -2)).clamp(min=EPS) / FP8_MAX
    b = (wt / b_scales.view(nb, 1, kb, 1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return a, a_scales, b.view(nb * BLOCK, K)[:N].contiguous(), b_scales


def roofline(w):
    M, N, K = w["M"], w["N"], w["K"]
    scale_bytes = 4 * (M * K // BLOCK + -(-N // BLOCK) * K // BLOCK)
    return Roofline(bytes=M * K + N * K + scale_bytes + 2 * M * N, flops=2 * M * N * K)


def terms(inputs):
    """sum_k |A[m, k] * B[n, k]| for every output element: what bounds any summation's error."""
    a, a_scales, b, b_scales = inputs
    N = b.shape[0]
    a_abs = a.float().abs() * a_scales.repeat_interleave(BLOCK, dim=1)
    b_abs = b.float().abs() * b_scales.repeat_interleave(BLOCK, dim=0)[:N].repeat_interleave(BLOCK, dim=1)
    return a_abs @ b_abs.t()


# Every product of two fp8 codes is exact in fp32. Hopper's fp8 tensor cores keep about 14 bits of
# the running partial sum (DeepSeek-V3 report) and add a 32-deep slice per instruction: four such
# additions per 128-wide block, each off by at most ~2^-13 of the partial's magnitude, bound a block's
# error by 2^-11 of the magnitudes of its terms; the fp32 adds across blocks are far smaller. 2^-10
# doubles that. A per-tensor scale, a block scale read for the wrong block, a dropped K block or a
# bf16 accumulator land many elements far outside it.
REL = 2.0 ** -10
CHECK = AccumulationBound("c", terms, REL, why="fp8 products are exact; the bound covers an fp8 tensor core's "
                                                "narrow partial sums promoted to fp32 every 128 products")

HELDOUT_SHAPES = (f"any M >= 1, any N >= 1 and K a multiple of {BLOCK}; submit also checks three held-out shapes "
                  "drawn at random, each long on one axis and narrow on the others: one with more rows, one with more "
                  "columns and one deeper (more K blocks) than any workload of the backend")
# The GPU draw's wide shape is past 65536 columns: a kernel whose column tile was sized to cover the widest
# workload (36864) in one block covers no more. The interpreter's stays narrow (fixed_width_block is skipped).
WIDEST_TILE = 65536


def heldout_workloads(rng, smoke):
    """Three shapes, each past every workload of its backend on one axis (the spec checks it) and narrow
    on the others; the interpreter pays per program (one per output tile and K block). The wide one has
    more column tiles than any smoke workload launches, so a grid capped at those stops short."""
    if smoke:
        shapes = [(rng.randint(151, 300), rng.randint(1, 40), BLOCK), (rng.randint(1, 3), rng.randint(257, 600), BLOCK),
                  (rng.randint(1, 4), rng.randint(1, 40), BLOCK * rng.randint(4, 8))]
    else:
        shapes = [(rng.randint(16385, 20000), rng.randint(1, 256), BLOCK),
                  (rng.randint(1, 64), rng.randint(WIDEST_TILE + 1, WIDEST_TILE + 512), BLOCK * 4),
                  (rng.randint(1, 64), rng.randint(1, 512), BLOCK * rng.randint(145, 160))]
    return [Workload(f"{m}x{n}x{k}", {"M": m, "N": n, "K": k}) for m, n, k in shapes]


TASK = TaskSpec(
    title="Block-scaled fp8 GEMM (w8a8)",
    family="quantization",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("c", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "zeros", "bfloat16", "float32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="the scales are inputs: the kernel divides by nothing"),
        "output_scaled": WrongSolution(skip="the one output is bf16, and 1e-3 of it is inside the accumulation bound"),
        "fixed_width_block": WrongSolution(skip="it keeps the first 65536 columns, so only a held-out shape wider than "
                                                "that fails it: 500 programs and 30-80 s per evaluation on the "
                                                "interpreter. The GPU draw has such a shape"),
    },
    # No NoLargeIntermediate or MaxLaunches: the guidance allows a split-K workspace (2 x splits times the output)
    # and its reduction launch for decode, while dequantised weights are only 0.375x the output at 4096x24576x1536
    # and a dequantise pass is one launch more: no bound separates them.
    design_properties=[
        DesignProperty("never_dequantised", "L1",
                       "Neither operand is dequantised, in memory or in registers: the fp8 codes go into tl.dot as "
                       "loaded, and the scales multiply the dot's result"),
        DesignProperty("fresh_partial_per_k_block", "L1",
                       "Each 128-wide K block's dot yields a fresh fp32 partial that is scaled by the outer product of "
                       "the row and column-block scales and added to an fp32 accumulator; the dot never accumulates "
                       "across blocks"),
        DesignProperty("weights_read_k_major", "L2",
                       "Weight tiles are read as K-by-N views of the output-major [N, K] weights by addressing: no "
                       "transposed or contiguous copy of B is made"),
        DesignProperty("grouped_program_order", "L2",
                       "Programs run in grouped (swizzled) order, a band of row tiles walking one column of weight "
                       "tiles, so the shared operand tiles come from L2"),
        DesignProperty("fp8_tensor_core_dot", "L3",
                       "The K step equals the 128-wide scale block and each step runs one tl.dot of fp8 e4m3 tiles "
                       "with an fp32 result",
                       UsesDot()),
        DesignProperty("decode_fills_every_sm", "L3",
                       "Tiles are chosen on the host from M without autotuning; for decode batches one row tile covers "
                       "M and narrow column tiles or a K split give every SM programs"),
    ],
)
