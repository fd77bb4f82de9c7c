"""SwiGLU forward and backward: the activation of a gated MLP and its two input gradients."""

import torch

from d2k_env.tasks import (Alternative, BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate,
                           Output, PerOutput, Roofline, TaskSpec, Workload, WrongSolution)

SOURCES = [
    "Liger-Kernel src/liger_kernel/ops/swiglu.py (_swiglu_forward_kernel, _swiglu_backward_kernel)",
    "Hugging Face transformers LlamaMLP (act_fn(gate_proj(x)) * up_proj(x))",
]
DESCRIPTION = """
Inputs: a [M, I] bf16 (the gate projection), b [M, I] bf16 (the up projection) and dc [M, I] bf16 (the
gradient of the output). a and b are the two halves of one packed gate_up tensor [M, 2I], as a merged
projection writes it: a = packed[:, :I], b = packed[:, I:], so their row stride is 2I, not I.
Compute, elementwise:
    s  = sigmoid(a)
    c  = a * s * b                                   (the forward output, silu(a) * b)
    db = dc * a * s
    da = dc * b * s * (1 + a * (1 - s))              (d silu(a) / da = s * (1 + a * (1 - s)))
Return (c, da, db), each [M, I] bf16 and contiguous, as new tensors; the inputs must not be modified.
"""

WORKLOADS = [
    Workload("16384x14336", {"M": 16384, "I": 14336}),
    Workload("8192x28672", {"M": 8192, "I": 28672}),
    Workload("16384x768", {"M": 16384, "I": 768}),
]
SMOKE_WORKLOADS = [
    Workload("8x256", {"M": 8, "I": 256}),
    Workload("5x200", {"M": 5, "I": 200}),
    Workload("3x1000", {"M": 3, "I": 1000}),
]


def make_inputs(w, gen, device):
    M, I = w["M"], w["I"]
    # Per-row scales spanning orders of magnitude (tokens differ); gate values far enough out that the
    # sigmoid saturates on both sides; gradients much smaller than activations, as in training.
    packed = torch.randn(M, 2 * I, generator=gen, device=device) * torch.exp(
        torch.randn(M, 1, generator=gen, device=device))
    packed[:, :I] *= 3.0
    packed = packed.to(torch.bfloat16)
    dc = (torch.randn(M, I, generator=gen, device=device)
          * torch.exp(torch.randn(M, 1, generator=gen, device=device) - 4.0)).to(torch.bfloat16)
    return packed[:, :I], packed[:, I:], dc


def roofline(w):
    M, I = w["M"], w["I"]
    # One call: read a, b and dc, write c, da and db (bf16). Split into a forward and a backward
    # kernel, as training runs them, it is 6*M*I + 10*M*I.
    return Roofline(bytes=12 * M * I, flops=16 * M * I)


def in_fp32(inputs):
    """The answer of fp32 math rounded once per output, as a fused kernel computes it: eager rounds
    silu(a), dc * b and dc * silu(a) to bf16 on the way, which can move an output a step further."""
    a, b, dc = (t.float() for t in inputs)
    s = torch.sigmoid(a)
    silu = a * s
    return ((silu * b).to(torch.bfloat16), (dc * b * s * (1 + a * (1 - s))).to(torch.bfloat16),
            (dc * silu).to(torch.bfloat16))


HELDOUT_SHAPES = ("any M >= 1 and I >= 1 (I a multiple of 8 on the GPU), a and b always views of one packed "
                  "[M, 2I] tensor; submit also checks three held-out shapes drawn at random, each long on one "
                  "axis and narrow on the others: one with more rows than any workload of the backend, one with "
                  "rows wider than 32768, and one of middling size")


def heldout_workloads(rng, smoke):
    """Three shapes, each past every workload of its backend on one axis and narrow on the others."""
    if smoke:
        # Rows past the smoke shapes; one row wider than any block a kernel could size for the published
        # widths (28672 on the GPU, so 32768); a middling shape.
        shapes = [(rng.randint(97, 160), 8 * rng.randint(2, 8)), (1, rng.randint(32769, 36000)),
                  (rng.randint(9, 16), rng.randint(1001, 2000))]
    else:
        shapes = [(rng.randint(16385, 65536), 8 * rng.randint(1, 64)), (rng.randint(1, 16), 8 * rng.randint(3585, 8192)),
                  (rng.randint(1, 2048), 8 * rng.randint(64, 512))]
    return [Workload(f"{m}x{i}", {"M": m, "I": i}) for m, i in shapes]


# 0.1x the outputs: a contiguous copy of the gate or up half, or any one materialised temporary (silu,
# dc * b, the silu derivative), is a third of the outputs' bytes or more.
PROPERTIES = [
    DesignProperty("one_pass_three_outputs", "L1", "One kernel launch computes c, da and db in a single pass over "
                   "a, b and dc, the three outputs sharing one fp32 sigmoid", MaxLaunches(1)),
    DesignProperty("silu_grad_from_sigmoid", "L1", "The silu derivative is formed from the same sigmoid as s * (1 + "
                   "a * (1 - s)): one exponential per element, no second sigmoid or exp"),
    DesignProperty("traffic_at_floor", "L1", "DRAM traffic is near 12 bytes per element: a, b and dc read once, c, "
                   "da and db written once", BytesNearRoofline(1.3)),
    DesignProperty("nothing_materialised", "L2", "Neither silu, dc * b, the silu derivative nor a contiguous copy "
                   "of the gate or up half is written to global memory: a and b are read through the packed strided "
                   "views", NoLargeIntermediate(0.1)),
    DesignProperty("row_column_programs", "L2", "Each program owns a run of columns within one row, addressed as "
                   "row * stride + column (no flat index divided by the width), with the column-block count from "
                   "the width"),
    DesignProperty("int64_rows_streaming_loads", "L3", "The row index is cast to int64 before it multiplies the "
                   "stride, the three input streams load with evict_first, and each thread moves 16-byte vectors"),
]


TASK = TaskSpec(
    title="SwiGLU forward and backward",
    family="normalisation",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("c", torch.bfloat16), Output("da", torch.bfloat16), Output("db", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided", "zeros", "zeros_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput(alternative=Alternative(
        in_fp32, "fp32 math rounded once per output (the fused order) is checked against that order's answer; "
                 "eager's order, with silu(a) and the products rounded to bf16 on the way, against the baseline's")),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="SwiGLU divides by nothing: there is no eps"),
        "output_scaled": WrongSolution(
            skip="every output is bf16: a change of 1e-3 is a quarter of a bf16 step, inside the one-step bound"),
    },
    design_properties=PROPERTIES,
)
