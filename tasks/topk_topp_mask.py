"""Top-k then top-p (nucleus) masking of a batch of logits, per-request k and p, ties exact."""

import math

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, Roofline, TaskSpec,
                           Workload, WrongSolution)
from d2k_env.tasks.sampling_masks import TopKTopPMask

SOURCES = [
    "vLLM vllm/v1/sample/ops/topk_topp_triton.py",
    "vLLM vllm/v1/sample/ops/topk_topp_sampler.py (apply_top_k_top_p, the PyTorch fallback)",
]
DESCRIPTION = """
A sampler restricts each request's next-token distribution before drawing from it. Inputs:
    logits [B, V] fp32 (bf16 logits of the LM head cast to fp32, so equal values are common; -inf
    marks tokens a request may not produce), k [B] int32 (1 <= k; k >= V means no top-k),
    p [B] fp32 (0 < p <= 1; p = 1 means no top-p).
Per row, with the k-th largest logit kth (counting equal values separately):
    top-k keeps every logit >= kth (ties with the k-th are kept);
    q = softmax of the kept logits (the others at -inf);
    top-p then keeps a logit x iff the q-mass of the logits strictly greater than x is below p
    (the smallest head of the distribution reaching p; equal logits are kept or masked together).
Return masked [B, V] fp32: each kept logit unchanged, every other element -inf.
"""

WORKLOADS = [
    Workload("64x128256", {"B": 64, "V": 128256, "k": 50, "p": 0.9}),
    Workload("256x151936", {"B": 256, "V": 151936, "k": 20, "p": 0.95}),
    Workload("8x129280-koff", {"B": 8, "V": 129280, "k": None, "p": 0.8}),
]
SMOKE_WORKLOADS = [
    Workload("5x1000", {"B": 5, "V": 1000, "k": 10, "p": 0.9}),
    Workload("6x3001-koff", {"B": 6, "V": 3001, "k": None, "p": 0.7}),
]


def make_inputs(w, gen, device):
    B, V, p = w["B"], w["V"], w["p"]
    k = V if w["k"] is None else w["k"]
    if device.type == "meta":
        return (torch.empty(B, V, device=device), torch.empty(B, dtype=torch.int32, device=device),
                torch.empty(B, device=device))
    # Temperature-scaled logits: per-row spread log-uniform over 0.5..8, and a head of a few boosted
    # tokens whose strength varies by row (confident requests and flat ones, whose mass lies mostly
    # outside the top k), rounded to bf16 as the LM head produces them (ties near every cut).
    spread = torch.exp(torch.empty(B, 1, device=device).uniform_(math.log(0.5), math.log(8.0), generator=gen))
    logits = torch.randn(B, V, generator=gen, device=device) * spread
    head = torch.randint(0, V, (B, 8), generator=gen, device=device)
    strength = 4.0 * spread * torch.rand(B, 1, generator=gen, device=device) ** 2
    logits.scatter_add_(1, head, strength * torch.rand(B, 8, generator=gen, device=device))
    logits = logits.to(torch.bfloat16).float()
    # About 0.2% of tokens banned everywhere (bad words, unused vocabulary).
    logits.masked_fill_(torch.rand(B, V, generator=gen, device=device) < 0.002, float("-inf"))
    # The workload's k and p are the batch's common setting; about a quarter of the requests bring
    # their own (k from 1 to 2k, p from 0.5 to 1).
    ks = torch.full((B,), min(k, V), dtype=torch.int32, device=device)
    ps = torch.full((B,), p, dtype=torch.float32, device=device)
    own = torch.rand(B, generator=gen, device=device) < 0.25
    if k < V:
        ks = torch.where(own, torch.randint(1, min(2 * k, V) + 1, (B,), generator=gen, device=device, dtype=torch.int32), ks)
    ps = torch.where(own, torch.empty(B, device=device).uniform_(0.5, 1.0, generator=gen), ps)
    # Rows in a random order: a hot request (high temperature, no head: most of its mass lies outside
    # the top k), a request without top-k, a grammar-constrained one with fewer allowed tokens than
    # k, a tie forced at the k-th logit, a request without top-p, a row of equal logits.
    rows = torch.randperm(B, generator=gen, device=device).tolist()
    hot, no_k, grammar, tie, no_p, flat = (rows + [None] * 6)[:6]
    if hot is not None:
        logits[hot] = (0.5 * torch.randn(V, generator=gen, device=device)).to(torch.bfloat16).float()
    if grammar is not None:
        allowed = torch.randperm(V, generator=gen, device=device)[:max(1, int(ks[grammar]) // 2)]
        keep = logits[grammar, allowed].clone()
        logits[grammar] = float("-inf")
        logits[grammar, allowed] = torch.where(keep > float("-inf"), keep, 0.0)
    if flat is not None:
        logits[flat] = logits[flat, 0].clamp(min=-1.0)
    if tie is not None and ks[tie] < V:
        kt = int(ks[tie])
        values, where = logits[tie].topk(kt + 1)
        logits[tie, where[kt]] = values[kt - 1]
    if no_k is not None:
        ks[no_k] = V
    if no_p is not None:
        ps[no_p] = 1.0
    return logits, ks, ps


def roofline(w):
    # The logits read once and the masked copy written once; k and p are negligible.
    return Roofline(bytes=8 * w["B"] * w["V"] + 8 * w["B"], flops=0)


MASS_TOL = 1e-4

HELDOUT_SHAPES = ("any B >= 1, V >= 2, k >= 1 or none, 0 < p <= 1; submit also checks held-out shapes drawn at random "
                  "(two on each backend), each long on one axis and narrow on the others: one with more rows than "
                  "any workload of the backend, one with a vocabulary wider than 262144 and a p above any workload's")


def heldout_workloads(rng, smoke):
    """Shapes of the family, each past every workload of its backend on one axis at least (the spec
    checks it). The wide one has a vocabulary past 262144 (the next power of two of every published
    one: a kernel with one fixed-width tile per row fails it) and a single row; the tall one more
    rows than any workload (a capped grid fails it) over a short vocabulary."""
    if smoke:
        tall = (rng.randint(7, 9), rng.randint(200, 2000))
        p_tall, p_wide = round(rng.uniform(0.5, 0.9), 3), round(rng.uniform(0.951, 0.99), 3)
    else:
        tall = (rng.randint(257, 384), rng.randint(1000, 50000))
        p_tall, p_wide = round(rng.uniform(0.5, 0.95), 3), round(rng.uniform(0.951, 0.99), 3)
    wide = (1, rng.randint(262145, 270000))
    out = []
    for (b, v), p in ((tall, p_tall), (wide, p_wide)):
        k = rng.choice((None, rng.randint(1, 64)))
        out.append(Workload(f"{b}x{v}-k{k or 'off'}", {"B": b, "V": v, "k": k, "p": p}))
    return out


# No BytesNearRoofline: the search re-reads each row about a dozen times and, with 80 MB of rows in
# flight, later passes partly come from HBM (the reference's docstring): its traffic is well above the
# one-read, one-write roofline by design.
PROPERTIES = [
    DesignProperty("selection_by_counting", "L1", "No sort: each cut is a threshold value found by counting logits "
                   "(or summing their mass) at many candidate keys per pass over the row, then one masking pass"),
    DesignProperty("exact_ordered_keys", "L1", "Logits are searched as int keys that order like the floats "
                   "(negative magnitudes flipped, -0.0 folded into +0.0), so each cut is the key of an existing "
                   "logit and ties are kept together"),
    DesignProperty("one_launch_row_per_program", "L2", "One launch with one program per row; whether a row needs "
                   "its top-k or top-p search is read from k and p inside the kernel", MaxLaunches(1)),
    DesignProperty("no_global_scratch", "L2", "No sorted copy, permutation index, softmax or cumulative sum goes to "
                   "global memory: only scalars (row maximum, interval, cuts, total mass) pass between passes",
                   NoLargeIntermediate(0.1)),
    DesignProperty("device_while_search", "L3", "The search is a device-side while loop on the interval width with "
                   "32-bit keys in the [tile, candidates] compare, and masked tail lanes load -inf"),
    DesignProperty("max_shifted_mass", "L3", "Masses are exp(x - row max) in fp32, with a finite stand-in for an "
                   "all -inf row, and the survivors' total mass is summed the same way as the search statistics"),
]


TASK = TaskSpec(
    title="Top-k / top-p logit masking",
    family="sampling",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("masked", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=TopKTopPMask(mass_tol=MASS_TOL),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: masses are compared with p, and counts with k, exactly"),
    },
    design_properties=PROPERTIES,
)
