"""AWQ w4a16 GEMM: fp16 activations times int4 weights packed in AWQ's order, with per-group zeros and scales."""

import torch

from d2k_env.tasks import (AccumulationBound, DesignProperty, Heldout, Output, Roofline, TaskSpec, UsesDot, Workload,
                           WrongSolution)

SOURCES = [
    "vLLM vllm/model_executor/layers/quantization/awq_triton.py (awq_gemm_kernel, awq_dequantize_kernel)",
    "AutoAWQ awq/modules/linear/gemm.py (the packing order)",
]
GROUP = 128
PACK = 8  # int4 values per int32
AWQ_NIBBLE = (0, 4, 1, 5, 2, 6, 3, 7)
DESCRIPTION = f"""
Inputs (K a multiple of {GROUP}, N a multiple of {PACK}):
    x       [M, K] float16             activations
    qweight [K, N/{PACK}] int32          int4 weights, {PACK} per int32 along N
    qzeros  [K/{GROUP}, N/{PACK}] int32    int4 zero points, one per ({GROUP}-row group, column), packed the same way
    scales  [K/{GROUP}, N] float16      one scale per ({GROUP}-row group, column)
AWQ's packing order: the value of column {PACK}j + c is in int32 column j at bits 4*p .. 4*p+3, where
p = {list(AWQ_NIBBLE)}[c] (columns 0..7 sit in nibbles 0, 4, 1, 5, 2, 6, 3, 7), unsigned 0..15.
Dequantised weights, in fp16: W[k, n] = fp16(q[k, n] - z[k // {GROUP}, n]) * scales[k // {GROUP}, n] (one fp16
rounding of an exact product). Return y = x @ W [M, N] float16, summed in fp32 (any order) and rounded once.
Activations have per-token magnitudes over two orders of magnitude and some all-zero (padding) rows.
"""

WORKLOADS = [
    Workload("16x4096x14336", {"M": 16, "K": 4096, "N": 14336}, launch_bound=True),
    Workload("64x28672x8192", {"M": 64, "K": 28672, "N": 8192}),
    Workload("2048x4096x14336", {"M": 2048, "K": 4096, "N": 14336}),
]
# Ragged M and N (N a multiple of 8 but of no tile), several groups along K.
SMOKE_WORKLOADS = [
    Workload("5x384x72", {"M": 5, "K": 384, "N": 72}),
    Workload("40x256x40", {"M": 40, "K": 256, "N": 40}),
]


def pack_awq(values):
    """[rows, N] ints in 0..15 -> [rows, N / 8] int32 in AWQ's nibble order."""
    rows, n = values.shape
    v = values.to(torch.int64).view(rows, n // PACK, PACK)
    shifts = torch.tensor(AWQ_NIBBLE, dtype=torch.int64, device=values.device) * 4
    packed = (v << shifts).sum(dim=-1)  # the nibbles do not overlap: the sum is their bitwise or
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)  # as int32 bits


def make_inputs(w, gen, device):
    M, K, N = w["M"], w["K"], w["N"]
    groups = K // GROUP
    x = torch.randn(M, K, generator=gen, device=device) * torch.exp(torch.randn(M, 1, generator=gen, device=device))
    if M > 1:  # padding tokens: about one row in 16 all zero, one at least
        zero = torch.rand(M, 1, generator=gen, device=device) < 1 / 16
        zero[torch.randint(M, (1,), generator=gen, device=device)] = True
        x = x.masked_fill(zero, 0.0)
    q = torch.randint(0, 16, (K, N), generator=gen, device=device)
    # Zero points near the middle of the range, as AWQ's asymmetric quantisation of centred weights gives.
    z = (8 + 2.0 * torch.randn(groups, N, generator=gen, device=device)).round().clamp(0, 15)
    scales = 0.002 * torch.exp(0.5 * torch.randn(groups, N, generator=gen, device=device))
    return x.to(torch.float16), pack_awq(q), pack_awq(z), scales.to(torch.float16)


def roofline(w):
    M, K, N = w["M"], w["K"], w["N"]
    # fp16 x and y, half a byte per weight, and per group a scale (2 bytes) and a zero (half a byte) per column.
    return Roofline(bytes=2 * M * K + K * N // 2 + (K // GROUP) * N * 5 // 2 + 2 * M * N, flops=2 * M * N * K)


def terms(inputs):
    """sum_k |x[m, k] * W[k, n]| for every output element."""
    x, qweight, qzeros, scales = inputs
    shifts = torch.tensor(AWQ_NIBBLE, device=qweight.device, dtype=torch.int32) * 4
    unpack = lambda p: ((p.unsqueeze(-1) >> shifts) & 0xF).view(p.shape[0], -1)  # noqa: E731
    w = (unpack(qweight) - unpack(qzeros).repeat_interleave(GROUP, 0)).float() * scales.float().repeat_interleave(GROUP, 0)
    return x.float().abs() @ w.abs()


# The dequantised weights are exact fp16 values and fp16 products are exact in fp32, so an fp32 sum in any
# order is off by a few fp32 roundings, far inside 2^-10 of the terms. The expected answer is an fp16 matmul:
# cuBLAS may reduce split-K partials in fp16 (torch's default allows it), each reduction off by at most
# 2^-11 of the partials' magnitude; 2^-10 covers two. vLLM's own Triton kernel accumulates in fp16 (one
# rounding per K step, errors of random sign): its port uses 8-17% of the bound on the smoke shapes (CPU).
# A wrong nibble order, unsubtracted zeros or a scale of the wrong group move many elements far outside it.
REL = 2.0 ** -10
CHECK = AccumulationBound("y", terms, REL, why="fp16 weights and products are exact; the bound covers fp16 "
                                                "partial sums, as cuBLAS's reduced-precision reductions and vLLM's "
                                                "fp16-accumulating kernel make them")

HELDOUT_SHAPES = (f"any M >= 1, K a multiple of {GROUP} and N a multiple of {PACK}; submit also checks three "
                  "held-out shapes drawn at random, each long on one axis and narrow on the others: more rows, "
                  "more columns and deeper (more groups) than any workload of the backend")


def heldout_workloads(rng, smoke):
    """Three shapes, each past every workload of its backend on one axis (the spec checks it) and narrow
    on the others. The wide one has more column tiles than any smoke workload launches. On the interpreter
    the wide and deep ones have fewer rows than the reference's switch to dequantising once (16) and the
    long one more, so held-out shapes meet both of its paths."""
    if smoke:
        shapes = [(rng.randint(257, 320), GROUP, PACK * rng.randint(1, 4)),
                  (rng.randint(1, 3), GROUP, PACK * rng.randint(33, 64)),
                  (rng.randint(1, 3), GROUP * rng.randint(4, 8), PACK * rng.randint(1, 4))]
    else:
        shapes = [(rng.randint(2049, 4096), GROUP * 2, PACK * rng.randint(1, 64)),
                  (rng.randint(1, 64), GROUP * 2, PACK * rng.randint(2049, 2304)),
                  (rng.randint(1, 64), GROUP * rng.randint(225, 256), PACK * rng.randint(1, 64))]
    return [Workload(f"{m}x{k}x{n}", {"M": m, "K": k, "N": n}) for m, k, n in shapes]


TASK = TaskSpec(
    title="AWQ w4a16 GEMM",
    family="quantization",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("y", torch.float16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "zeros", "float16", "float32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="nothing is divided: the scales are inputs"),
        "output_scaled": WrongSolution(skip="the one output is fp16, and 1e-3 of it is inside the accumulation bound"),
        "fixed_width_block": WrongSolution(skip="it keeps the first 16384 columns, so only a held-out shape wider than "
                                                "that fails it: over a hundred programs per evaluation on the "
                                                "interpreter. The GPU draw has such a shape"),
    },
    design_properties=[
        # No automatic check: the reference dequantises in registers below 16 rows only (smoke 5x384x72 and the
        # smoke draw's wide and deep held-out shapes); from 16 rows on it materialises the fp16 weight matrix,
        # 256x and 448x the output on the decode workloads 16x4096x14336 and 64x28672x8192 (its switch point is
        # a measurement, references/awq_w4a16_gemm.py). NoLargeIntermediate bounds every workload alike, so
        # any bound the reference meets would also pass a solution that dequantises at every batch size.
        DesignProperty("dequant_in_registers", "L1",
                       "Decode batches of a few rows dequantise the weights tile by tile inside the K loop, in "
                       "registers, never writing a dequantised matrix; batches from the size at which a dense GEMM "
                       "on once-dequantised fp16 weights measures faster on the GPU (chosen on the host from M) "
                       "dequantise them once into memory"),
        DesignProperty("exact_dequant", "L1",
                       "Each weight is (code - zero) in integers, times its group's fp16 scale in fp32, rounded once "
                       "to fp16 before any dot: the same operand the eager dequantisation builds, on both paths"),
        DesignProperty("word_expanded_by_shift", "L2",
                       "Each packed int32 word (weights and zero points alike) is loaded once per tile and expanded to "
                       "its eight columns by a per-column shift and a 0xF mask"),
        DesignProperty("split_k_fixed_order", "L2",
                       "Decode batches of a few rows split K into ranges of whole groups; the fp32 partials are "
                       "summed in a fixed order by a second pass that rounds once to fp16, with no atomics"),
        DesignProperty("large_batch_dense_gemm", "L2",
                       "Batches past the switch run a dense fp16 GEMM on the dequantised matrix, in grouped program "
                       "order so that a band of row tiles reads each weight tile while it is in L2"),
        DesignProperty("fp16_tensor_cores", "L3",
                       "fp16 weight tiles (expanded in registers, or read from the dequantised matrix) feed tl.dot "
                       "with an fp32 accumulator; in the fused kernel the K step divides the group so that each step "
                       "loads one row of zero points and scales",
                       UsesDot()),
        DesignProperty("shifts_outside_k_loop", "L3",
                       "Each column's nibble shift (AWQ order 0, 4, 1, 5, 2, 6, 3, 7) is computed from the column "
                       "index once per program, outside any K loop, not looked up per step"),
    ],
)
