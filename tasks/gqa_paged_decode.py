"""Grouped-query attention decode over a paged KV cache: one new query token per request attends to
its whole cached context, gathered through a token-to-slot index (SGLang's Triton decode backend)."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, Output, PerOutput, Roofline,
                           RoundingNoise, TaskSpec, UsesDot, Workload, WrongSolution, noise_sigma)

SOURCES = [
    "SGLang python/sglang/srt/layers/attention/triton_ops/decode_attention.py (decode_attention_fwd, grouped kernel)",
    "SGLang python/sglang/srt/layers/attention/torch_native_backend.py (the per-request fallback)",
]
PAGE = 16  # slots per page of the KV pool: the cache hands pages out in random order
BF16_ROUNDOFF = 2.0 ** -8  # unit roundoff of bf16 (round to nearest)
SIGMAS = 10

DESCRIPTION = f"""
Decode step of grouped-query attention over a paged KV cache. Inputs:
    q [B, Hq, d] bf16: the new token of each of B requests;
    k_buffer, v_buffer [S, Hkv, d] bf16: the KV pool, S slots; Hq is a multiple of Hkv and q head h
        reads KV head h // (Hq / Hkv);
    kv_indptr [B + 1] int32 and kv_indices [N] int32: request b's context is the slots
        kv_indices[kv_indptr[b] : kv_indptr[b + 1]], in order (kv_indptr[0] = 0, kv_indptr[B] = N).
Every request has at least one token; lengths are uneven (one request may have a single token).
The pool is paged ({PAGE} slots a page): a request's slots come in runs of up to {PAGE} from pages in
random physical order, and the pool has pages no request uses. Compute, per request b and q head h,
with n = the context length, K_j, V_j = the rows of slot kv_indices[kv_indptr[b] + j] for h's KV head,
and scale = 1 / sqrt(d):
    s_j = scale * q[b, h] . K_j        p = softmax(s) over j < n, in fp32
    o[b, h] = sum_j p_j * V_j           (accumulated in fp32)
Return o [B, Hq, d] bf16, a new tensor. A kernel may round the probabilities p to bf16 for the P.V
product (tensor cores) and accumulate in fp32: the noise that adds is what the check allows for
(scores, the maximum, the exponentials and the sums stay fp32).
"""

WORKLOADS = [
    Workload("64x4k-32q8kv", {"B": 64, "ctx": 4096, "Hq": 32, "Hkv": 8, "d": 128}),
    Workload("32x8k-64q8kv", {"B": 32, "ctx": 8192, "Hq": 64, "Hkv": 8, "d": 128}),
    Workload("128x2k-64q8kv", {"B": 128, "ctx": 2048, "Hq": 64, "Hkv": 8, "d": 128}),
    Workload("4x32k-32q8kv", {"B": 4, "ctx": 32768, "Hq": 32, "Hkv": 8, "d": 128}),
]
# Mean context lengths that are no multiple of a page or a tile, long enough for several tiles per
# request (and several splits for the longest); groups of 2 and 8 heads.
SMOKE_WORKLOADS = [
    Workload("3x150-4q2kv-d64", {"B": 3, "ctx": 150, "Hq": 4, "Hkv": 2, "d": 64}),
    Workload("4x90-8q1kv", {"B": 4, "ctx": 90, "Hq": 8, "Hkv": 1, "d": 128}),
]


def seq_lens(B, total, gen, device):
    """B uneven lengths (log-normal shares), each >= 1, summing to ``total``; with three requests or
    more, one of them a single token. Tensor ops only, so the meta device makes them too."""
    share = torch.exp(0.75 * torch.randn(B, generator=gen, device=device))
    if B >= 3:
        share[torch.randint(B, (1,), generator=gen, device=device)] = 0.0
    lens = 1 + torch.floor(share / share.sum() * (total - B)).long()
    # What the floors left out goes to the longest (a mask, not an index: no host read on any device).
    lens += (torch.arange(B, device=device) == share.argmax()) * (total - lens.sum())
    return lens


def make_inputs(w, gen, device):
    B, ctx, Hq, Hkv, d = w["B"], w["ctx"], w["Hq"], w["Hkv"], w["d"]
    total = B * ctx
    lens = seq_lens(B, total, gen, device)
    kv_indptr = torch.zeros(B + 1, dtype=torch.long, device=device)
    kv_indptr[1:] = torch.cumsum(lens, 0)
    # Pages: each request needs cdiv(len, PAGE) of them; the pool has a quarter more than the most
    # any draw needs (a partial page per request), so it always has holes. Pages go out in random order.
    used = -(-total // PAGE) + B
    pool_pages = used + max(4, used // 4)
    pages = (lens + PAGE - 1) // PAGE
    first_page = torch.cumsum(pages, 0) - pages
    order = torch.randperm(pool_pages, generator=gen, device=device)
    t = torch.arange(total, device=device)
    seq = torch.searchsorted(kv_indptr[1:], t, right=True)
    pos = t - kv_indptr[seq]
    kv_indices = (order[first_page[seq] + pos // PAGE] * PAGE + pos % PAGE).to(torch.int32)
    # Real K caches have outlier channels and real queries per-head temperatures: scores spread over
    # several units, so softmax is peaked for some heads and flat for others.
    slots = pool_pages * PAGE
    k_scale = torch.exp(0.3 * torch.randn(Hkv, d, generator=gen, device=device))
    v_scale = torch.exp(0.5 * torch.randn(Hkv, d, generator=gen, device=device))
    q_scale = 2.0 * torch.exp(0.4 * torch.randn(Hq, 1, generator=gen, device=device))
    k_buffer = (torch.randn(slots, Hkv, d, generator=gen, device=device) * k_scale).to(torch.bfloat16)
    v_buffer = (torch.randn(slots, Hkv, d, generator=gen, device=device) * v_scale).to(torch.bfloat16)
    q = (torch.randn(B, Hq, d, generator=gen, device=device) * q_scale).to(torch.bfloat16)
    return q, k_buffer, v_buffer, kv_indptr.to(torch.int32), kv_indices


def roofline(w):
    B, ctx, Hq, Hkv, d = w["B"], w["ctx"], w["Hq"], w["Hkv"], w["d"]
    # Every context row of K and V read once (bf16), plus its slot index; q read and o written once.
    return Roofline(bytes=4 * B * ctx * Hkv * d + 4 * B * ctx + 4 * B * Hq * d, flops=4 * B * Hq * ctx * d)


def output_noise(inputs):
    """Per element of o, the standard deviation of the error that rounding each probability to bf16
    adds (l kept in fp32 from the unrounded ones): u / sqrt(3) * sqrt(sum_j p_j^2 (|V_j| + |o|)^2) / sum_j p_j,
    which bounds it whether the kernel normalises by the rounded or the unrounded sum."""
    q, k_buffer, v_buffer, kv_indptr, kv_indices = inputs
    B, Hq, d = q.shape
    Hkv = k_buffer.shape[1]
    sigma = torch.empty(B, Hq, d, dtype=torch.float32, device=q.device)
    bounds = kv_indptr.tolist()
    for b in range(B):
        idx = kv_indices[bounds[b]:bounds[b + 1]].long()
        k, v = k_buffer[idx].float(), v_buffer[idx].float()  # [n, Hkv, d]
        s = torch.einsum("hgd,nhd->hgn", q[b].float().view(Hkv, Hq // Hkv, d), k) / d ** 0.5
        p = torch.exp(s - s.amax(-1, keepdim=True))
        total = p.sum(-1, keepdim=True)
        o = torch.einsum("hgn,nhd->hgd", p, v).abs() / total
        p2 = p * p
        spread = (torch.einsum("hgn,nhd->hgd", p2, v * v) + 2 * o * torch.einsum("hgn,nhd->hgd", p2, v.abs())
                  + o * o * p2.sum(-1, keepdim=True))
        sigma[b] = noise_sigma(spread, total, BF16_ROUNDOFF).reshape(Hq, d)
    return sigma


CHECK = RoundingNoise(
    "o", output_noise, SIGMAS, noise="the bf16 rounding of the probabilities before P.V",
    why=f"that noise is a sum of independent roundings, each within 2^-8 relative; Hoeffding's bound puts "
        f"the chance of passing {SIGMAS} of its standard deviations at 1e-7 per element, and honest kernels measure "
        "under 3, while bf16 scores (every probability off by 2^-8 times its score) or a lost rescale land far "
        "outside")

HELDOUT_SHAPES = ("any B >= 1, mean context length >= 1, Hkv >= 1, Hq a multiple of Hkv and d in (64, 128, 256); "
                  "submit also checks three held-out shapes drawn at random, each long on one axis and narrow on "
                  "the others: more requests than any workload of the backend, longer contexts than any, and "
                  "more KV heads and q heads per KV head (a group that may be no power of two) with d = 256")


def _workload(B, ctx, Hq, Hkv, d):
    return Workload(f"{B}x{ctx}-{Hq}q{Hkv}kv-d{d}", {"B": B, "ctx": ctx, "Hq": Hq, "Hkv": Hkv, "d": d})


def heldout_workloads(rng, smoke):
    """Each shape is past every workload of its backend on one axis (the spec checks it). On the
    interpreter: more requests (B up to 8), a context of hundreds of tokens (several tiles and
    splits), and 3-4 KV heads of 3-4 q heads each at d = 256; on the GPU: up to twice the
    requests, a context past 32K, and up to 16 KV heads of eight q heads at d = 256."""
    if smoke:
        g = rng.choice((3, 4))
        hkv = rng.choice((3, 4))
        shapes = [(rng.randint(5, 8), rng.randint(5, 20), 2, 1, 64),
                  (rng.randint(1, 2), rng.randint(300, 600), 4, 2, rng.choice((64, 128))),
                  (1, rng.randint(10, 30), g * hkv, hkv, 256)]
    else:
        hkv = rng.randint(9, 16)
        shapes = [(rng.randint(129, 256), rng.randint(16, 700), 32, 8, 128),
                  (rng.randint(1, 2), rng.randint(32769, 40000), rng.choice((8, 32)), rng.choice((1, 8)), 128),
                  (rng.randint(1, 8), rng.randint(100, 3000), 8 * hkv, hkv, 256)]
    return [_workload(*s) for s in shapes]


TASK = TaskSpec(
    title="Paged GQA decode attention",
    family="attention",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("o", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "zeros"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    # Two launches: the split pass and the merge (flash decoding). No NoLargeIntermediate bound: the
    # fp32 partials are 4-128x o's bytes as the split count varies with the shapes, while a gathered
    # copy of the context is only 75x on the smallest smoke workload, so no one fraction separates them.
    design_properties=[
        DesignProperty("kv_rows_read_once_per_group", "L1",
                       "All q heads of a KV head are processed together, so each cached K and V row is read from "
                       "DRAM once per KV head, not once per q head",
                       BytesNearRoofline(1.5)),
        DesignProperty("split_context_then_merge", "L1",
                       "Flash decoding: each split of the context runs an online softmax on its own and a second, "
                       "small pass merges the normalised partials weighted by their log-sum-exps",
                       MaxLaunches(2)),
        DesignProperty("no_context_copy", "L2",
                       "K and V rows are gathered through the slot indices tile by tile; no contiguous or "
                       "head-repeated copy of the context and no score matrix is written to global memory"),
        DesignProperty("partials_written_once", "L2",
                       "Each (request, q head, split) partial row and LSE is written by exactly one program, empty "
                       "splits included with LSE = -inf, so the merge needs no initialisation pass"),
        DesignProperty("launch_from_shapes", "L2",
                       "Split count, tiles and grids come from the shapes alone (batch, KV heads, number of slots); "
                       "no host synchronisation or read of the lengths back to the host"),
        DesignProperty("padded_group_tensor_cores", "L3",
                       "The group's query rows are padded (masked) to a tensor-core tile height so Q.K^T and P.V "
                       "are tl.dot, scores fp32 and only probabilities rounded to bf16 for P.V",
                       UsesDot()),
    ],
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: every request has at least one token, so every softmax "
                                          "denominator is at least 1"),
        "output_scaled": WrongSolution(skip="the only output is bf16: 1 + 1e-3 is a quarter of a step"),
    },
)
