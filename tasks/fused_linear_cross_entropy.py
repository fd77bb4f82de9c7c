"""Fused linear cross-entropy: the LM head's loss and its gradients for the hidden states and the
weight, in bounded memory (the logits of every token are never held at once)."""

import math

import torch

from d2k_env.tasks import (DesignProperty, Heldout, NoLargeIntermediate, Output, PerOutput, Roofline, TaskSpec,
                           Tolerance, UsesDot, Workload, WrongSolution)
from d2k_env.tasks.normwise import NormwiseError

IGNORE_INDEX = -100
SOURCES = [
    "Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py (fused_linear_cross_entropy_forward: chunks "
    "of tokens, the logits of a chunk overwritten by their gradient)",
    "Liger-Kernel src/liger_kernel/ops/cross_entropy.py (liger_cross_entropy_kernel: online softmax per row)",
]
DESCRIPTION = """
Inputs: h [BT, H] bf16 (the last hidden states of BT tokens), weight [V, H] bf16 (the LM head) and
targets [BT] int64 (a vocabulary index per token, or -100 for a token without loss: padding, prompt).
Their values are fixed-point: h[t] whole multiples of 1/64 of a power of two (one per token, at most
255 of them), the weight whole multiples of 1/8 of one power of two (at most 31), so every partial sum
of h @ weight^T is exact in fp32 (for H up to 45 000) and the logits below are the same in any fp32
accumulation order.
The forward was logits = h @ weight^T (fp32 accumulation, rounded to bf16 as the GEMM writes them),
z = those bf16 logits in fp32, and the loss the mean over the n tokens whose target is not -100 of
lse(z[t]) - z[t, targets[t]] (n >= 1 always). The rounding of the logits is part of the function:
peaked rows (logits of 20 have a bf16 step of 0.125) move the softmax by percents, so logits kept in
fp32 give another loss (up to 1e-3 of it) and other gradients (rows of grad_W off by 5 to 18% of their
norm on scaled-down shapes), and so do bf16 logits of another accumulation order where the inputs are
not exact: two honest fp32 orders of bf16 normals rounded 2.7e-4 of them apart at H = 15440 and
disagreed past the bound below on 2 seeds of 8 (0 of 24 at H <= 4096), on the CPU.
Return, for that loss and d loss = 1:
    loss    [] fp32      (a 0-d tensor)
    grad_h  [BT, H] bf16 = dz @ weight
    grad_W  [V, H] fp32  = dz^T @ h, accumulated in fp32
where dz[t] = (softmax(z[t]) - onehot(targets[t])) / n, and dz[t] = 0 for tokens of target -100.
Memory is bounded: the bytes forward allocates in all (every buffer, counted once each) may not pass
    the outputs (4 + 2*BT*H + 4*V*H) + 4*max(BT*H, V) + 16*BT + 256 bytes,
that is, beside the outputs a workspace as large as h in fp32 (the logits of a chunk of tokens, about
2*BT*H/V rows in bf16; at least two rows), 16 bytes per token and a few scalars. The full logits need
2*BT*V bytes in bf16 (4*BT*V in fp32): 1 to 4.6 GiB on the workloads, V/(2H) = 8 to 19 times that workspace,
so a solution holding them fails with [allocation-limit]. Reuse one chunk buffer: a fresh one per chunk
is counted per chunk.
"""

WORKLOADS = [
    Workload("8192x4096x128256", {"BT": 8192, "H": 4096, "V": 128256}),
    Workload("16384x4096x151936", {"BT": 16384, "H": 4096, "V": 151936}),
    Workload("4096x8192x128256", {"BT": 4096, "H": 8192, "V": 128256}),
]
SMOKE_WORKLOADS = [
    Workload("48x32x300", {"BT": 48, "H": 32, "V": 300}),
    Workload("37x24x517", {"BT": 37, "H": 24, "V": 517}),
    Workload("9x32x1100", {"BT": 9, "H": 32, "V": 1100}),
]


# Hidden states are whole multiples of 1/64 of a power of two per token (normal, sigma 64 of them, cut
# at 255: 8 bits, as bf16 holds), the weight's of 1/8 of one power of two (sigma 8, cut at 31). Every
# product in row t of h @ W^T is then a whole number of one unit, and any partial sum, in any order,
# is at most the sum of the terms' magnitudes, about 51 * 6.4 * H units (1.06 times that at 6 sigma
# of the row-to-row spread): under 2^24 for H up to 45 000, so exact in fp32. The logits, and their
# rounding to bf16, are then the same for every honest kernel. Drawn as bf16 of normals instead, the
# rounding depends on the order: two honest fp32 orders on the CPU (one matmul; 64-deep K steps added
# in turn) rounded 1.2e-4 (H = 1024) to 2.8e-4 (H = 15440) of the logits differently, and at
# {268, 1024}x15440x8000 moved a row of grad_W by 0.037 and 0.051 of its norm: 2 seeds of 8 refused
# (0 of 24 at H <= 4096). h needs 8 bits, so an int8 or fp8 GEMM cannot hold it exactly.
def _fixed_point(rows, cols, steps, most, gen, device):
    """Normal draws in units of 1/steps, rounded to whole units and cut at most of them."""
    return (torch.randn(rows, cols, generator=gen, device=device) * steps).round_().clamp_(-most, most) / steps


def make_inputs(w, gen, device):
    BT, H, V = w["BT"], w["H"], w["V"]
    # Per-token scales spanning orders of magnitude (logit spreads from about 0.05 to 20: flat softmaxes
    # and ones peaked on a single entry), powers of two as exp(1.2 randn) rounded in log2; the weight's
    # rows ~ 1/sqrt(H), also a power of two, so logits are O(token scale) and exact (above).
    scales = torch.exp2((torch.randn(BT, 1, generator=gen, device=device) * (1.2 / math.log(2))).round_())
    h = (_fixed_point(BT, H, 64, 255, gen, device) * scales).to(torch.bfloat16)
    weight = (_fixed_point(V, H, 8, 31, gen, device) * 2.0 ** -round(math.log2(H) / 2)).to(torch.bfloat16)
    targets = torch.randint(V, (BT,), generator=gen, device=device)
    # The first and last vocabulary entries are targets somewhere (tails of a V-blocked loop), and about
    # one token in eight has no loss; the first token always has one, so n >= 1.
    targets[torch.randint(BT, (2,), generator=gen, device=device)] = torch.tensor([0, V - 1], device=device)
    ignored = torch.rand(BT, generator=gen, device=device) < 1 / 8
    ignored[0] = False
    return h, weight, targets.masked_fill(ignored, IGNORE_INDEX)


def roofline(w):
    BT, H, V = w["BT"], w["H"], w["V"]
    # Three GEMMs of 2*BT*H*V FLOPs each (logits, grad_h, grad_W); at least h and the weight read once and
    # grad_h and the fp32 grad_W written once.
    return Roofline(bytes=2 * BT * H + 2 * V * H + 8 * BT + 2 * BT * H + 4 * V * H, flops=6 * BT * H * V)


def allocation_limit(w):
    """The outputs, a workspace of 4*max(BT*H, V) bytes, 16 bytes per token and 256 more (DESCRIPTION)."""
    BT, H, V = w["BT"], w["H"], w["V"]
    return (4 + 2 * BT * H + 4 * V * H) + 4 * max(BT * H, V) + 16 * BT + 256


HELDOUT_SHAPES = ("any BT >= 1, H >= 1 and V >= 2 (H a multiple of 8 on the GPU); submit also checks three held-out "
                  "shapes drawn at random, each long on one axis and narrow on the others: one with more tokens than "
                  "any workload of the backend, one with a wider hidden size and one with a larger vocabulary")


def heldout_workloads(rng, smoke):
    """Three shapes, each past every workload of its backend on one axis and narrow on the others."""
    if smoke:
        # More tokens with a small vocabulary (a chunk then holds 32 or more tokens); a wider hidden size; a
        # vocabulary past 1200, so the grad_W GEMM launches more programs than any launch of the smoke shapes
        # (a grid capped at what those launch leaves tiles of grad_W unwritten).
        shapes = [(rng.randint(49, 96), rng.randint(16, 24), rng.randint(20, 48)),
                  (rng.randint(2, 6), rng.randint(33, 100), rng.randint(20, 300)),
                  (rng.randint(3, 8), rng.randint(8, 16), rng.randint(1200, 1600))]
    else:
        shapes = [(rng.randint(16385, 32768), 8 * rng.randint(8, 32), rng.randint(1000, 8192)),
                  (rng.randint(1, 512), 8 * rng.randint(1025, 2048), rng.randint(1000, 32000)),
                  (rng.randint(1, 256), 8 * rng.randint(16, 128), rng.randint(151937, 262144))]
    return [Workload(f"{bt}x{h}x{v}", {"BT": bt, "H": h, "V": v}) for bt, h, v in shapes]


GRAD_CHECK = NormwiseError(
    max_rel=0.02,
    why="dz rounded to bf16 as a GEMM operand (2^-9 relative per term) and fp32 accumulation in any chunk order "
        "move a row by about 2^-8 of its terms' norm; the baseline's grad_W is rounded to bf16 once more. A dropped "
        "chunk, a missing 1/n or a missing one-hot term moves rows by far more")

# 0.2x the outputs: the reference's chunk buffer is at most 0.15x of them (48x32x300), while the full
# bf16 logits are 0.25-1.9x on every workload but 9x32x1100 (0.14x), where the allocation limit fails
# them anyway. The launch count grows with the number of chunks (34-90 on the GPU): no MaxLaunches.
PROPERTIES = [
    DesignProperty("chunked_logits", "L1", "The [BT, V] logits never exist at once: tokens go through in chunks "
                   "whose logits buffer is about the size of h in fp32, projected into both gradients before the "
                   "next chunk", NoLargeIntermediate(0.2)),
    DesignProperty("online_lse", "L1", "Each row's maximum and sum of exponentials are carried together in one pass "
                   "over its logits in fp32 (the sum rescaled when the maximum grows); a second pass writes dz"),
    DesignProperty("one_buffer_dz_in_place", "L2", "One chunk buffer is allocated before the loop and reused; the "
                   "row kernel overwrites its logits with dz in place, and both gradient GEMMs read that buffer"),
    DesignProperty("grad_w_fp32_epilogue", "L2", "grad_W is accumulated in fp32 in the GEMM's epilogue (the first "
                   "chunk writes, later ones add), and transposes of the head and dz are strides, never copies"),
    DesignProperty("tensor_core_gemms", "L3", "The three GEMMs (logits, grad_h, grad_W) run on tensor cores: tl.dot "
                   "on bf16 tiles with fp32 accumulation and int64 addresses", UsesDot()),
    DesignProperty("count_on_device", "L3", "The number of tokens with a target is counted by a kernel into a "
                   "device scalar the row kernel loads: no host sync, and every launch depends only on the shapes"),
]


TASK = TaskSpec(
    title="Fused linear cross-entropy (loss, grad_h, grad_W)",
    family="fusion",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("loss", torch.float32), Output("grad_h", torch.bfloat16), Output("grad_w", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided", "zeros", "zeros_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput(checks={
        "loss": Tolerance(atol=0.0, rtol=5e-4, why="the mean of per-token losses from the bf16 logits, which the "
                                                    "inputs make the same in any order: only the fp32 sums of the "
                                                    "softmax and the mean differ, far less than 5e-4 of the loss; "
                                                    "1e-3 does not fit"),
        "grad_h": GRAD_CHECK, "grad_w": GRAD_CHECK}),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    allocation_limit=allocation_limit,
    wrong_solutions={
        "eps_removed": WrongSolution(skip="the softmax subtracts the row maximum: there is no eps"),
        "last_row_unwritten": WrongSolution(skip="the first output, the loss, is 0-d: it has no rows"),
        "fixed_width_block": WrongSolution(skip="the first output, the loss, is 0-d: it has no columns"),
    },
    design_properties=PROPERTIES,
)
