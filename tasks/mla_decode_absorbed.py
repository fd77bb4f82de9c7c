"""Multi-head latent attention (DeepSeek-V2/V3) decode with the up-projections absorbed: every head's
query attends over one shared 576-wide cache row per token (512 latent + 64 rope), whose first 512
columns are also the value (SGLang's Triton decode backend, MLA path)."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, Output, PerOutput, Roofline, RoundingNoise, TaskSpec,
                           UsesDot, Workload, WrongSolution, noise_sigma)

SOURCES = [
    "SGLang python/sglang/srt/layers/attention/triton_ops/decode_attention.py (decode_attention_fwd with Lk = 576, "
    "Lv = 512: the grouped kernel's split rope dot)",
    "SGLang python/sglang/srt/layers/attention/torch_native_backend.py (the per-request fallback)",
]
PAGE = 16  # slots per page of the KV pool: the cache hands pages out in random order
LATENT, ROPE = 512, 64
SCALE = (128 + 64) ** -0.5  # DeepSeek's softmax scale: 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)
BF16_ROUNDOFF = 2.0 ** -8
SIGMAS = 10

DESCRIPTION = f"""
Decode step of DeepSeek-style multi-head latent attention, projections absorbed (every head reads the
same compressed cache). Inputs:
    q_nope [B, H, {LATENT}] bf16 and q_pe [B, H, {ROPE}] bf16: each request's new token, per head (the latent
        part already multiplied by the key up-projection, and the rotary part);
    kv_buffer [S, {LATENT + ROPE}] bf16: the cache, one row per slot: the latent c (columns 0-{LATENT - 1}) then the
        rotary key k_pe (columns {LATENT}-{LATENT + ROPE - 1});
    kv_indptr [B + 1] int32 and kv_indices [N] int32: request b's context is the slots
        kv_indices[kv_indptr[b] : kv_indptr[b + 1]], in order (kv_indptr[0] = 0, kv_indptr[B] = N).
Every request has at least one token; lengths are uneven (one request may have a single token). The
pool is paged ({PAGE} slots a page, pages in random physical order, pages no request uses). Compute, per
request b and head h, with n = the context length, row_j = kv_buffer[kv_indices[kv_indptr[b] + j]] and
scale = 1/sqrt(192) = {SCALE:.9f} (DeepSeek's: the head dim before absorption):
    s_j = scale * (q_nope[b, h] . row_j[:{LATENT}] + q_pe[b, h] . row_j[{LATENT}:])
    p = softmax(s) over j < n, in fp32
    o[b, h] = sum_j p_j * row_j[:{LATENT}]          (the latent is the value; accumulated in fp32)
Return o [B, H, {LATENT}] bf16, a new tensor. A kernel may round the probabilities p to bf16 for the P.V
product (tensor cores) and accumulate in fp32: the noise that adds is what the check allows for (scores,
the maximum, the exponentials and the sums stay fp32).
"""

WORKLOADS = [
    Workload("64x16h-4k", {"B": 64, "H": 16, "ctx": 4096}),
    Workload("32x128h-4k", {"B": 32, "H": 128, "ctx": 4096}),
    Workload("8x128h-32k", {"B": 8, "H": 128, "ctx": 32768}),
]
# Fewer heads than one block of them, and more than one block with a partial second; contexts of a
# few tiles, no multiple of a page or a tile.
SMOKE_WORKLOADS = [
    Workload("3x4h-90", {"B": 3, "H": 4, "ctx": 90}),
    Workload("2x20h-70", {"B": 2, "H": 20, "ctx": 70}),
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
    B, H, ctx = w["B"], w["H"], w["ctx"]
    total = B * ctx
    lens = seq_lens(B, total, gen, device)
    kv_indptr = torch.zeros(B + 1, dtype=torch.long, device=device)
    kv_indptr[1:] = torch.cumsum(lens, 0)
    # Pages in random order from a pool a quarter larger than any draw needs: it always has holes.
    used = -(-total // PAGE) + B
    pool_pages = used + max(4, used // 4)
    pages = (lens + PAGE - 1) // PAGE
    first_page = torch.cumsum(pages, 0) - pages
    order = torch.randperm(pool_pages, generator=gen, device=device)
    t = torch.arange(total, device=device)
    seq = torch.searchsorted(kv_indptr[1:], t, right=True)
    pos = t - kv_indptr[seq]
    kv_indices = (order[first_page[seq] + pos // PAGE] * PAGE + pos % PAGE).to(torch.int32)
    # The latent comes out of an RMSNorm with a learned weight (channels of different scales); the
    # rotary keys are unit-scale; the absorbed queries carry per-head temperatures, so scores spread
    # over several units and softmax is peaked for some heads, flat for others.
    slots = pool_pages * PAGE
    c_scale = torch.exp(0.4 * torch.randn(LATENT, generator=gen, device=device))
    latent = torch.randn(slots, LATENT, generator=gen, device=device) * c_scale
    kv_buffer = torch.cat([latent, torch.randn(slots, ROPE, generator=gen, device=device)], 1).to(torch.bfloat16)
    q_scale = 1.5 * torch.exp(0.4 * torch.randn(H, 1, generator=gen, device=device))
    q_nope = (torch.randn(B, H, LATENT, generator=gen, device=device) * q_scale / c_scale.mean()).to(torch.bfloat16)
    q_pe = (torch.randn(B, H, ROPE, generator=gen, device=device) * q_scale).to(torch.bfloat16)
    return q_nope, q_pe, kv_buffer, kv_indptr.to(torch.int32), kv_indices


def roofline(w):
    B, H, ctx = w["B"], w["H"], w["ctx"]
    # Each context row (576 bf16) read once and its index; q read and o written once. Per head and
    # token: a 576-deep score dot and a 512-wide value update.
    return Roofline(bytes=2 * (LATENT + ROPE) * B * ctx + 4 * B * ctx + 2 * B * H * (2 * LATENT + ROPE),
                    flops=2 * (LATENT + ROPE + LATENT) * B * H * ctx)


def output_noise(inputs):
    """Per element of o, the standard deviation of the error that rounding each probability to bf16
    adds: u / sqrt(3) * sqrt(sum_j p_j^2 (|c_j| + |o|)^2) / sum_j p_j (RoundingNoise)."""
    q_nope, q_pe, kv_buffer, kv_indptr, kv_indices = inputs
    B, H, _ = q_nope.shape
    sigma = torch.empty(B, H, LATENT, dtype=torch.float32, device=q_nope.device)
    bounds = kv_indptr.tolist()
    q = torch.cat([q_nope, q_pe], -1).float()
    for b in range(B):
        rows = kv_buffer[kv_indices[bounds[b]:bounds[b + 1]].long()].float()
        s = q[b] @ rows.T * SCALE
        p = torch.exp(s - s.amax(-1, keepdim=True))
        c = rows[:, :LATENT]
        total = p.sum(-1, keepdim=True)
        o = (p @ c).abs() / total
        p2 = p * p
        spread = p2 @ (c * c) + 2 * o * (p2 @ c.abs()) + o * o * p2.sum(-1, keepdim=True)
        sigma[b] = noise_sigma(spread, total, BF16_ROUNDOFF)
    return sigma


CHECK = RoundingNoise(
    "o", output_noise, SIGMAS, noise="the bf16 rounding of the probabilities before P.V",
    why=f"that noise is a sum of independent roundings, each within 2^-8 relative; Hoeffding's bound puts "
        f"the chance of passing {SIGMAS} of its standard deviations at 1e-7 per element, and honest kernels measure "
        "under 3, while bf16 scores, a lost rescale "
        "or a dropped rope term land far outside")

HELDOUT_SHAPES = ("any B >= 1, H >= 1 and mean context length >= 1 (the widths fixed at 512 + 64 by the model); "
                  "submit also checks three held-out shapes drawn at random, each long on one axis and narrow on "
                  "the others: more requests than any workload of the backend, more heads (no multiple of a block "
                  "of heads), and a longer context")


def heldout_workloads(rng, smoke):
    """Each shape is past every workload of its backend on one axis (the spec checks it)."""
    if smoke:
        shapes = [(rng.randint(4, 6), 4, rng.randint(5, 30)), (1, rng.randint(21, 40), rng.randint(5, 30)),
                  (1, rng.randint(1, 4), rng.randint(200, 300))]
    else:
        shapes = [(rng.randint(65, 128), 16, rng.randint(100, 2000)), (rng.randint(1, 4), rng.randint(129, 160),
                                                                       rng.randint(500, 4000)),
                  (1, rng.choice((16, 128)), rng.randint(32769, 40000))]
    return [Workload(f"{b}x{h}h-{c}", {"B": b, "H": h, "ctx": c}) for b, h, c in shapes]


TASK = TaskSpec(
    title="Absorbed MLA decode attention",
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
    # Two launches: the split pass and the merge. No byte or intermediate bound: the cache is read
    # once per head block (8 blocks at 128 heads, served from L2 only as far as the launch order
    # allows), and the fp32 partials are 6-66x o's bytes as the split count follows the shapes.
    design_properties=[
        DesignProperty("latent_tile_is_key_and_value", "L1",
                       "Each gathered latent tile is used on chip both as the key of the score product and as the "
                       "value of the P.V product; no separate value copy is read or built"),
        DesignProperty("split_kv_then_merge", "L1",
                       "Online softmax over splits of the context, then a second small pass merging the "
                       "normalised partials by their log-sum-exps",
                       MaxLaunches(2)),
        DesignProperty("no_cache_copies", "L2",
                       "Cached rows are gathered through the slot indices tile by tile; no gathered, upcast or "
                       "split latent/rotary copy of the cache and no score matrix reaches global memory"),
        DesignProperty("head_block_per_program", "L2",
                       "A program owns one request, a block of heads (at least a tensor-core tile tall) and one "
                       "split, so each cached row is read once per head block, not once per head"),
        DesignProperty("two_dots_one_score", "L3",
                       "The score is a latent tl.dot plus a separate rotary tl.dot, both in fp32; the query parts "
                       "are not concatenated into one padded 576-wide operand",
                       UsesDot()),
        DesignProperty("exp2_and_wide_slots", "L3",
                       "Softmax scale and log2(e) folded into one multiplier with exp2; slot indices widened to 64 "
                       "bits before multiplying by the row stride; tail rows masked to -inf"),
    ],
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: every request has at least one token, so every softmax "
                                          "denominator is at least 1"),
        "output_scaled": WrongSolution(skip="the only output is bf16: 1 + 1e-3 is a quarter of a step"),
        "fixed_width_block": WrongSolution(skip="the output's width is the model's latent, 512 on every shape of "
                                                "the family: no held-out shape is wider than a block of it"),
    },
)
