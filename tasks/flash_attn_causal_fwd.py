"""Causal flash attention forward (prefill): every query attends to the keys at or before its own
position, returning the output and the log-sum-exp (the Triton tutorial's fused attention,
FlashAttention's Triton variant)."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, PerOutput, Roofline,
                           RoundingNoise, TaskSpec, Tolerance, UsesDot, Workload, WrongSolution, noise_sigma)

SOURCES = [
    "Triton python/tutorials/06-fused-attention.py (forward: _attn_fwd, _attn_fwd_inner)",
    "FlashAttention flash_attn/flash_attn_triton.py (the Triton forward, causal)",
]
BF16_ROUNDOFF = 2.0 ** -8  # unit roundoff of bf16 (round to nearest)
SIGMAS = 10

DESCRIPTION = """
Causal self-attention forward. Inputs: q, k, v [B, H, N, d] bf16 (contiguous). Compute, per batch b,
head h and query position i, in fp32, with scale = 1 / sqrt(d):
    s_ij = scale * q[b, h, i] . k[b, h, j]       for key positions j <= i (the others are masked out)
    lse[b, h, i] = log(sum_{j <= i} exp(s_ij))    (natural log)
    o[b, h, i]   = sum_{j <= i} exp(s_ij - lse[b, h, i]) * v[b, h, j]
Return (o [B, H, N, d] bf16, lse [B, H, N] fp32), new tensors. A kernel may round the probabilities to
bf16 for the P.V product (tensor cores) and accumulate in fp32: the noise that adds is what the check
on o allows for (scores, the running maximum, the exponentials and the sums stay fp32).
"""

WORKLOADS = [
    Workload("4x32x4k", {"B": 4, "H": 32, "N": 4096, "d": 128}),
    Workload("1x64x8k", {"B": 1, "H": 64, "N": 8192, "d": 128}),
    Workload("1x32x16k", {"B": 1, "H": 32, "N": 16384, "d": 128}),
]
# Lengths that are no multiple of a tile, long enough for whole off-diagonal tiles before the
# diagonal ones; two head dims.
SMOKE_WORKLOADS = [
    Workload("1x2x200-d64", {"B": 1, "H": 2, "N": 200, "d": 64}),
    Workload("1x1x160", {"B": 1, "H": 1, "N": 160, "d": 128}),
]


def make_inputs(w, gen, device):
    B, H, N, d = w["B"], w["H"], w["N"], w["d"]
    # Per-head query temperatures and outlier key channels spread the scores over several units, so
    # softmax is peaked for some heads and flat for others. As in trained models, the queries of a
    # head share a direction and the first key lies along it: an attention sink, of a strength per
    # head, that takes a large share of many rows.
    q_scale = 2.0 * torch.exp(0.4 * torch.randn(1, H, 1, 1, generator=gen, device=device))
    k_scale = torch.exp(0.3 * torch.randn(1, H, 1, d, generator=gen, device=device))
    v_scale = torch.exp(0.5 * torch.randn(1, H, 1, d, generator=gen, device=device))
    shared = torch.randn(1, H, 1, d, generator=gen, device=device)
    sink = torch.exp(0.5 * torch.randn(1, H, 1, 1, generator=gen, device=device))
    q = (torch.randn(B, H, N, d, generator=gen, device=device) + 0.5 * shared) * q_scale
    k = torch.randn(B, H, N, d, generator=gen, device=device) * k_scale
    k[:, :, :1] += 0.5 * sink * shared
    v = torch.randn(B, H, N, d, generator=gen, device=device) * v_scale
    return q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)


def roofline(w):
    B, H, N, d = w["B"], w["H"], w["N"], w["d"]
    # q, k, v read and o written once (bf16), lse written (fp32); two N x N / 2 products of depth d.
    return Roofline(bytes=8 * B * H * N * d + 4 * B * H * N, flops=2 * B * H * N * N * d)


def output_noise(inputs):
    """Per element of o, the standard deviation of the error that rounding each probability to bf16
    adds (RoundingNoise; see gqa_paged_decode's for the formula), one head at a time (N x N fp32)."""
    q, k, v = inputs
    B, H, N, d = q.shape
    causal = torch.ones(N, N, dtype=torch.bool, device=q.device).tril()
    sigma = torch.empty(B, H, N, d, dtype=torch.float32, device=q.device)
    for b in range(B):
        for h in range(H):
            s = (q[b, h].float() @ k[b, h].float().T / d ** 0.5).masked_fill(~causal, float("-inf"))
            p = torch.exp(s - s.amax(-1, keepdim=True))
            vh = v[b, h].float()
            total = p.sum(-1, keepdim=True)
            o = (p @ vh).abs() / total
            p2 = p * p
            spread = p2 @ (vh * vh) + 2 * o * (p2 @ vh.abs()) + o * o * p2.sum(-1, keepdim=True)
            sigma[b, h] = noise_sigma(spread, total, BF16_ROUNDOFF)
    return sigma


# lse = log(sum_j exp(s_j)) from fp32 scores: each score is a 128-term fp32 dot product (errors of a
# few 1e-6 of its magnitude, under ~20 here) and the sum a few fp32 roundings per tile: 1e-4 + 1e-5
# of |lse| holds several times that. Scores rounded to bf16 move lse by up to 2^-9 of them (~1e-2);
# a dropped tile or a lost rescale by far more.
LSE_CHECK = Tolerance(1e-4, 1e-5, why="fp32 scores, exponentials and sums in any order; bf16 scores or a "
                                      "dropped tile do not fit")

CHECK = RoundingNoise(
    "o", output_noise, SIGMAS, noise="the bf16 rounding of the probabilities before P.V",
    why=f"that noise is a sum of independent roundings, each within 2^-8 relative; Hoeffding's bound puts "
        f"the chance of passing {SIGMAS} of its standard deviations at 1e-7 per element, and honest kernels measure "
        "under 3, while bf16 scores, a lost rescale "
        "or a dropped causal tile land far outside",
    rest=PerOutput({"lse": LSE_CHECK}))

HELDOUT_SHAPES = ("any B >= 1, H >= 1, N >= 1 and d in (64, 128, 256); submit also checks held-out shapes drawn at "
                  "random, each long on one axis and narrow on the others: more sequences than any workload of the "
                  "backend, more heads, a longer sequence, and d = 256")


def _workload(B, H, N, d):
    return Workload(f"{B}x{H}x{N}-d{d}", {"B": B, "H": H, "N": N, "d": d})


def heldout_workloads(rng, smoke):
    """Each shape is past every workload of its backend on one axis (the spec checks it), with a
    length that is no multiple of a tile; on the interpreter a batch of single-token sequences (each
    query's only key is itself) is among them."""
    if smoke:
        shapes = [(rng.randint(2, 4), 1, 1, 64), (2, 1, rng.randint(2, 60), 64),
                  (1, rng.randint(3, 4), rng.randint(17, 40), 64), (1, 1, rng.randint(201, 280), 64),
                  (1, 1, rng.randint(30, 70), 256)]
    else:
        shapes = [(rng.randint(5, 8), rng.randint(1, 4), rng.randint(500, 2000), 128),
                  (1, rng.randint(65, 96), rng.randint(100, 600), rng.choice((64, 128))),
                  (1, rng.randint(1, 2), rng.randint(16385, 20000), 128), (1, rng.randint(1, 8), rng.randint(1, 3000), 256)]
    return [_workload(*s) for s in shapes]


TASK = TaskSpec(
    title="Causal flash attention forward",
    family="attention",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("o", torch.bfloat16), Output("lse", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    # The score matrix of all heads is 4N / (2d + 4) times the outputs' bytes (over 2x on every
    # workload); the reference allocates nothing but o and lse.
    design_properties=[
        DesignProperty("online_softmax_no_scores", "L1",
                       "Online softmax: no score or probability matrix is stored in global memory; each query "
                       "block keeps a running max, sum and fp32 output, rescaled when the max rises, divided once",
                       NoLargeIntermediate(0.5)),
        DesignProperty("causal_tiles_skipped", "L1",
                       "The key loop of a query block stops at its diagonal: key tiles wholly after the block's "
                       "last row are never loaded, so about half of the N x N tiles are computed"),
        DesignProperty("single_fused_kernel", "L2",
                       "One kernel launch per call computes o and lse together, each written to HBM once",
                       MaxLaunches(1)),
        DesignProperty("scores_and_pv_on_tensor_cores", "L2",
                       "Q.K^T and P.V are tl.dot products accumulated in fp32, the probability tile fed from "
                       "registers as P.V's bf16 left operand",
                       UsesDot()),
        DesignProperty("unmasked_hot_loop", "L3",
                       "The key loop is split: tiles before the block's first row run with no causal or bounds "
                       "mask (a compile-time flag), only the diagonal tiles compare positions"),
        DesignProperty("exp2_folded_scale", "L3",
                       "exp2 on fp32 scores with 1/sqrt(d) and log2(e) folded into one multiplier; bf16 queries "
                       "are never pre-scaled; lse converted to natural log once, at the store"),
    ],
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: every query sees at least its own key, so every softmax "
                                          "denominator is at least 1"),
    },
)
