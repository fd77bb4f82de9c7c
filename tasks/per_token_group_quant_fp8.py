"""Per-token-group fp8 quantisation of activations (groups of 128 along K), as before fp8 GEMMs."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           PerOutput, Quantised, RelativeError, Roofline, TaskSpec, Workload, WrongSolution)

SOURCES = [
    "vLLM vllm/model_executor/layers/quantization/utils/fp8_utils.py (per_token_group_quant_fp8)",
    "SGLang python/sglang/srt/layers/quantization/fp8_kernel.py",
]
GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10
DESCRIPTION = f"""
Input: x [M, K] bf16, K a multiple of {GROUP}. Each row is split into groups of {GROUP} consecutive values.
For every group g, in fp32:
    scale[g] = max(amax(|x_g|), {EPS}) / {FP8_MAX}
    q_g      = clamp(x_g / scale[g], -{FP8_MAX}, {FP8_MAX}) cast to float8_e4m3fn (round to nearest even)
Return (q [M, K] float8_e4m3fn, scales [M, K/{GROUP}] fp32, row-major).
"""

WORKLOADS = [
    Workload("4096x7168", {"M": 4096, "K": 7168}),
    Workload("64x7168", {"M": 64, "K": 7168}, launch_bound=True),
    Workload("16384x8192", {"M": 16384, "K": 8192}),
    Workload("32768x2048", {"M": 32768, "K": 2048}),
]
SMOKE_WORKLOADS = [
    Workload("4x512", {"M": 4, "K": 512}),
    Workload("7x384", {"M": 7, "K": 384}),
]
def make_inputs(w, gen, device):
    M, K = w["M"], w["K"]
    # Group magnitudes vary over four orders of magnitude, with occasional outliers, as activations do.
    group_scale = torch.exp(2.0 * torch.randn(M, K // GROUP, 1, generator=gen, device=device))
    x = torch.randn(M, K // GROUP, GROUP, generator=gen, device=device) * group_scale
    outliers = torch.rand(M, K // GROUP, GROUP, generator=gen, device=device) < 0.002
    x = torch.where(outliers, x * 20.0, x)
    # All-zero groups (padding): only eps keeps their scale from being 0 and q from being NaN. One at
    # least, and about 1 in 64 more, when there is another group to carry the structure.
    if M * (K // GROUP) > 1:
        zero = torch.rand(M * (K // GROUP), 1, generator=gen, device=device) < 1 / 64
        zero[torch.randint(M * (K // GROUP), (1,), generator=gen, device=device)] = True
        x = x.reshape(-1, GROUP).masked_fill(zero, 0)
    return (x.reshape(M, K).to(torch.bfloat16),)


def roofline(w):
    M, K = w["M"], w["K"]
    # Read bf16 x, write fp8 q and one fp32 scale per group.
    return Roofline(bytes=3 * M * K + 4 * M * K // GROUP, flops=3 * M * K)


# bf16 inputs put many x / scale exactly on fp8 ties, which any fp32 rounding difference flips. On
# 4096x7168 (CPU, torch): x * (1 / scale) changes 0.05% of q, a scale one ulp off 0.14%; a bf16
# reciprocal of the scale changes 1.6% (3.1% with the product in bf16 too).
MAX_CHANGED_FRACTION = 0.005
# x / scale and x * (1 / scale) may round q to adjacent fp8 values; anything further is wrong. Both
# outputs are always compared, so a wrong scale is named beside the codes it moves.
CHECKS = {"scales": RelativeError(1e-5, why="fp32 rounding"), "q": Quantised(MAX_CHANGED_FRACTION)}


HELDOUT_SHAPES = (f"any M >= 1 and K a multiple of {GROUP}; submit also checks three held-out shapes drawn at random, "
                  "each long on one axis and narrow on the others: one with more rows than any workload of the "
                  "backend, one with rows of more than 64 groups (K > 8192), and one of middling size")


def heldout_workloads(rng, smoke):
    """Three shapes of the family, each past every workload of its backend on one axis at least (the
    spec checks it) and narrow on the others: the interpreter pays per group, about 2.5 ms each."""
    # The second has more groups per row than any workload, and than the 64 a [64, 128] tile per row
    # would hold, on both backends. On the interpreter the first has more rows than the 96 its draw
    # once stopped at (a grid capped at a constant read off that range fails) and one group each.
    if smoke:
        shapes = [(rng.randint(97, 192), GROUP), (1, GROUP * rng.randint(65, 80)),
                  (rng.randint(8, 10), GROUP * rng.randint(5, 6))]
    else:
        shapes = [(rng.randint(1, 4096), GROUP * rng.randint(1, 128)), (rng.randint(32769, 40960), GROUP),
                  (rng.randint(1, 3), GROUP * rng.randint(65, 256))]
    return [Workload(f"{m}x{k}", {"M": m, "K": k}) for m, k in shapes]


TASK = TaskSpec(
    title="Per-token-group fp8 quantisation",
    family="quantization",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("q", torch.float8_e4m3fn), Output("scales", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided", "float8_e4m3fn", "float32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput(CHECKS),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        # Small inputs get one group per program (enough programs to fill the GPU), so no tail is masked
        # on the smoke shapes; 16 groups per program overrun the 21 groups of 7x384.
        "tail_mask_dropped": WrongSolution(edits=(("MIN_PROGRAMS = 264", "MIN_PROGRAMS = 1"),)),
    },
    design_properties=[
        DesignProperty("one_pass_per_group", "L1",
                       "One pass per 128-value group: load, amax, scale, clamp and cast all in registers, in a single "
                       "launch per call",
                       MaxLaunches(1)),
        DesignProperty("spec_arithmetic", "L1",
                       "The scale is max(amax, 1e-10) / 448 in fp32, and x / scale is clamped to +-448 before the cast "
                       "to float8_e4m3fn, so an all-zero group gives zero codes, never NaN"),
        # 0.5 of the outputs (q and the scales, about M * K bytes): an fp32 copy of x is 3.9x them, |x| in bf16
        # 1.9x; the reference allocates only its outputs.
        DesignProperty("nothing_materialised", "L2",
                       "No fp32 copy of x, |x|, amax, quotient or clamped tensor exists in memory: nothing besides q "
                       "and the scales is allocated",
                       NoLargeIntermediate(0.5)),
        # Memory-bound, each byte touched once: the roofline's bytes are what the one-pass kernel moves.
        DesignProperty("each_byte_once", "L2",
                       "x is read once and q and the scales written once: DRAM traffic within 1.5x of the roofline's "
                       "bytes",
                       BytesNearRoofline(1.5)),
        DesignProperty("groups_per_program_from_count", "L3",
                       "Each program quantises several groups as a [G, 128] tile, the group the contiguous inner axis, "
                       "with G chosen on the host from the group count so every SM still gets several programs"),
        DesignProperty("int64_offsets", "L3",
                       "The flat group (or row) index is widened to 64 bits before it is multiplied by 128 or the row "
                       "stride"),
    ],
)
