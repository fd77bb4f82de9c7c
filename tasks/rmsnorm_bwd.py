"""RMSNorm backward: the input gradient and the fp32 weight gradient, as a training step runs it."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           PerOutput, Roofline, SumTolerance, TaskSpec, Workload, WrongSolution)

EPS = 1e-6  # the forward's: it is inside rstd, which make_inputs computes
SOURCES = [
    "FlashAttention flash_attn/ops/triton/layer_norm.py (_layer_norm_bwd_kernel, RMS mode: programs walk many rows, "
    "dW partials in registers)",
    "Liger-Kernel src/liger_kernel/ops/rms_norm.py (_rms_norm_backward_kernel)",
]
DESCRIPTION = """
Inputs: dy [M, N] bf16 (the gradient of y), x [M, N] bf16 (the forward's input), weight [N] bf16, and
rstd [M] fp32, the forward's saved rstd[i] = 1 / sqrt(mean(x[i]^2) + 1e-6) (computed in fp32).
The forward was y = (x * rstd) * weight in fp32. Compute, in fp32:
    x_hat = x * rstd[:, None]
    dx    = rstd[:, None] * (dy * weight - x_hat * mean(dy * weight * x_hat, over each row))
    dW    = sum over rows of dy * x_hat
Return (dx [M, N] bf16, rounded once, and dW [N] fp32), as new tensors; the inputs must not be modified.
Rows of x may be all zero (padding tokens: rstd is then 1000) and rows of dy all zero (tokens without loss).
"""

WORKLOADS = [
    Workload("32768x4096", {"M": 32768, "N": 4096}),
    Workload("16384x8192", {"M": 16384, "N": 8192}),
    Workload("16384x5120", {"M": 16384, "N": 5120}),
]
SMOKE_WORKLOADS = [
    Workload("12x256", {"M": 12, "N": 256}),
    Workload("7x200", {"M": 7, "N": 200}),
    Workload("5x1000", {"M": 5, "N": 1000}),
]


def make_inputs(w, gen, device):
    M, N = w["M"], w["N"]
    # Per-row scales spanning orders of magnitude on both x (activations) and dy (gradients): rstd
    # then spans them too, and dW is dominated by a few rows, as in training.
    x = (torch.randn(M, N, generator=gen, device=device)
         * torch.exp(torch.randn(M, 1, generator=gen, device=device) * 1.5)).to(torch.bfloat16)
    dy = (torch.randn(M, N, generator=gen, device=device)
          * torch.exp(torch.randn(M, 1, generator=gen, device=device) - 3.0)).to(torch.bfloat16)
    weight = (1.0 + 0.5 * torch.randn(N, generator=gen, device=device)).to(torch.bfloat16)
    if M > 1:
        # Padding tokens (x all zero: only eps kept rstd finite) and tokens without loss (dy all zero):
        # one of each at least, and about 1 in 64 more.
        pad = torch.rand(M, 1, generator=gen, device=device) < 1 / 64
        pad[torch.randint(M, (1,), generator=gen, device=device)] = True
        silent = torch.rand(M, 1, generator=gen, device=device) < 1 / 64
        silent[torch.randint(M, (1,), generator=gen, device=device)] = True
        x, dy = x.masked_fill(pad, 0), dy.masked_fill(silent, 0)
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1) + EPS)
    return dy, x, weight, rstd


def roofline(w):
    M, N = w["M"], w["N"]
    # Read dy and x (bf16) and rstd, write dx (bf16); the weight read and dW written once.
    return Roofline(bytes=6 * M * N + 4 * M + 2 * N + 4 * N, flops=9 * M * N)


HELDOUT_SHAPES = ("any M >= 1 and N >= 1 (N a multiple of 8 on the GPU); submit also checks three held-out shapes "
                  "drawn at random, each long on one axis and narrow on the others: one with more rows than any "
                  "workload of the backend, one with rows wider than 8192, and one of middling size")


def heldout_workloads(rng, smoke):
    """Three shapes, each past every workload of its backend on one axis and narrow on the others."""
    if smoke:
        # More rows than the smoke shapes (a grid or a dW reduction sized for them fails); rows wider
        # than one block of any published width (8192 on the GPU); a middling shape.
        shapes = [(rng.randint(97, 160), 8 * rng.randint(4, 16)), (rng.randint(2, 3), rng.randint(8193, 12288)),
                  (rng.randint(13, 24), rng.randint(1001, 3000))]
    else:
        shapes = [(rng.randint(32769, 65536), 8 * rng.randint(1, 64)), (rng.randint(1, 64), 8 * rng.randint(1025, 4096)),
                  (rng.randint(1, 3000), 64 * rng.randint(2, 128))]
    return [Workload(f"{m}x{n}", {"M": m, "N": n}) for m, n in shapes]


DW_CHECK = SumTolerance(
    rtol=1e-4, floor=2.0 ** -14,
    why="dW sums M products whose signs cancel: fp32 in any order, atomics included, stayed within 5e-6 of the "
        "largest |dW| on 32768 rows, while rounding x_hat, the products or partial sums to bf16 moves it 1.7e-3 "
        "or more")

# Two launches, not one: the guidance's dW path is per-program partials summed by a tiny second kernel
# (atomics are not rejected outright, but a second launch is the design). 1.0x the outputs: the partial
# dW buffer (programs x N fp32) is 0.86x the outputs on the smoke shapes, where a program has two rows,
# while any M-by-N fp32 temporary is 1.7x or more on every workload.
PROPERTIES = [
    DesignProperty("rstd_reused", "L1", "rstd is read from its input, one scalar per row, never recomputed from x: "
                   "no extra pass over x or row reduction for the statistics"),
    DesignProperty("dw_partials_not_atomics", "L1", "dW is reduced through per-program fp32 partial rows summed by "
                   "one small second kernel, not an atomic add per element or a column kernel re-reading dy and x",
                   MaxLaunches(2)),
    DesignProperty("traffic_at_floor", "L1", "DRAM traffic is near 6*M*N bytes: dy and x read once, dx written "
                   "once, the partial dW rows a few MB", BytesNearRoofline(1.3)),
    DesignProperty("no_mn_fp32_temporary", "L2", "No M-by-N temporary (x_hat, g, their product, fp32 dx) goes to "
                   "global memory; the only extra buffer is the programs-by-N fp32 partial dW",
                   NoLargeIntermediate(1.0)),
    DesignProperty("contiguous_row_blocks", "L2", "Each program walks a contiguous block of rows, all columns, "
                   "loading the weight once and carrying its partial dW in fp32 registers across its rows, written "
                   "once"),
    DesignProperty("grid_from_sm_count", "L3", "The grid is a small multiple of the SM count read from the device, "
                   "rows per program are computed on the host and passed in, and row offsets are int64"),
]


TASK = TaskSpec(
    title="RMSNorm backward (dx and fp32 dW)",
    family="normalisation",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("dx", torch.bfloat16), Output("dw", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided", "zeros", "zeros_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput(checks={"dw": DW_CHECK}),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={"eps_removed": WrongSolution(
        skip="eps is inside the forward's rstd, an input: the backward has no eps of its own")},
    design_properties=PROPERTIES,
)
