"""Speculative decoding's rejection sampler (vLLM's), with its randomness given as inputs."""

import math

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           Roofline, TaskSpec, Workload, WrongSolution)
from d2k_env.tasks.rejection_sampling import RejectionSampled

SOURCES = [
    "vLLM vllm/v1/sample/rejection_sampler.py (rejection_sample, rejection_random_sample_kernel, "
    "sample_recovered_tokens_kernel)",
]
DESCRIPTION = """
A draft model proposed up to K tokens per request; the target model scored them. Inputs (vLLM's
flattened layout: N draft positions in all, request b owning rows cu[b-1] .. cu[b]-1, cu[-1] = 0):
    draft_token_ids [N] int32, cu_num_draft_tokens [B] int32 (inclusive cumulative counts; requests
    have from 0 to K drafts), draft_probs [N, V] fp32, target_probs [N, V] fp32 (rows may hold exact
    zeros: top-k/top-p filtered requests), bonus_token_ids [B] int32, uniform_probs [N] fp64,
    q [B, V] fp32 (Exp(1) noise, one row per request), max_spec_len = K (a Python int).
Per request, in draft order: draft token d at row i is accepted iff draft_probs[i, d] > 0 and
target_probs[i, d] / draft_probs[i, d] >= uniform_probs[i] (the ratio in fp32). At the first rejection,
output instead the recovered token argmax_v max(target_probs[i, v] - draft_probs[i, v], 0) / q[b, v]
(an exponential race: a sample of the normalised residual distribution) and stop. If every draft is
accepted, append bonus_token_ids[b].
Return output_token_ids [B, K + 1] int32: the accepted drafts, then the recovered or bonus token, then
-1 in every remaining position.
"""

WORKLOADS = [
    Workload("64x4x128256", {"B": 64, "drafts": 4, "V": 128256}),
    Workload("128x2x129280", {"B": 128, "drafts": 2, "V": 129280}),
    Workload("32x8x151936", {"B": 32, "drafts": 8, "V": 151936}),
]
SMOKE_WORKLOADS = [
    Workload("4x3x1000", {"B": 4, "drafts": 3, "V": 1000}),
    Workload("3x5x3001", {"B": 3, "drafts": 5, "V": 3001}),
]


def num_drafts(B, K):
    """Draft positions in all: three quarters of the B x K slots (some requests propose fewer)."""
    return max(1, math.ceil(0.75 * B * K))


def make_inputs(w, gen, device):
    B, K, V = w["B"], w["drafts"], w["V"]
    N = num_drafts(B, K)
    if device.type == "meta":
        return (torch.empty(N, dtype=torch.int32, device=device), torch.empty(B, dtype=torch.int32, device=device),
                torch.empty(N, V, device=device), torch.empty(N, V, device=device),
                torch.empty(B, dtype=torch.int32, device=device), torch.empty(N, dtype=torch.float64, device=device),
                torch.empty(B, V, device=device), K)
    # Uneven draft counts (0 to K) summing to N: N of the B x K slots, chosen at random.
    slots = torch.randperm(B * K, generator=gen, device=device)[:N]
    counts = torch.bincount(slots // K, minlength=B)
    cu = counts.cumsum(0).to(torch.int32)
    # Target distributions: temperature-scaled logits with a head of boosted tokens; a quarter of the
    # rows top-k filtered (exact zeros). The draft model agrees up to noise on its logits.
    spread = torch.exp(torch.empty(N, 1, device=device).uniform_(math.log(0.5), math.log(4.0), generator=gen))
    logits = torch.randn(N, V, generator=gen, device=device) * spread
    head = torch.randint(0, V, (N, 4), generator=gen, device=device)
    logits.scatter_add_(1, head, 3.0 * spread * torch.rand(N, 4, generator=gen, device=device))
    target = torch.softmax(logits, dim=-1)
    filtered = torch.rand(N, 1, generator=gen, device=device) < 0.25
    kth = target.topk(min(20, V), dim=-1).values[:, -1:]
    target = torch.where(filtered & (target < kth), 0.0, target)
    target = target / target.sum(-1, keepdim=True)
    draft = torch.softmax(logits + 0.5 * torch.randn(N, V, generator=gen, device=device), dim=-1)
    draft_ids = torch.multinomial(draft, 1, generator=gen).squeeze(1).to(torch.int32)
    bonus = torch.randint(0, V, (B,), generator=gen, device=device, dtype=torch.int32)
    uniform = torch.rand(N, generator=gen, device=device, dtype=torch.float64)
    q = torch.empty(B, V, device=device).exponential_(generator=gen)
    return draft_ids, cu, draft, target, bonus, uniform, q, K


def roofline(w):
    B, K, V = w["B"], w["drafts"], w["V"]
    N = num_drafts(B, K)
    # The first rejected position of a request is the only one whose rows must be read: its target,
    # draft and noise rows (12 bytes per vocabulary entry); requests that accept every draft read
    # less, so this is the floor of a draw where each request rejects one. Plus the per-draft scalars.
    return Roofline(bytes=12 * B * V + N * 24 + B * (K + 1) * 4, flops=3 * B * V)


HELDOUT_SHAPES = ("any B >= 1, K >= 1 and V >= 2; submit also checks held-out shapes drawn at random (three on "
                  "each backend), each long on one axis and narrow on the others: more requests than any workload of "
                  "the backend, more than 16 drafts per request, and a vocabulary wider than any workload's")


def heldout_workloads(rng, smoke):
    """Shapes of the family, each past every workload of its backend on one axis (the spec checks it).
    The long-draft one has K + 1 past 16, the next power of two of every published K + 1 (a fixed
    tile of output columns fails it); the tall one more requests than any workload (a capped grid
    fails it); the wide one a longer vocabulary, with one or two requests."""
    if smoke:
        shapes = [(rng.randint(5, 8), 2, rng.randint(200, 1000)), (rng.randint(1, 2), rng.randint(16, 20), 500),
                  (1, rng.randint(1, 2), rng.randint(3002, 5000))]
    else:
        shapes = [(rng.randint(129, 192), 2, rng.randint(1000, 32000)), (2, rng.randint(16, 20), 32000),
                  (rng.randint(1, 2), rng.randint(1, 2), rng.randint(151937, 200000))]
    return [Workload(f"{b}x{k}x{v}", {"B": b, "drafts": k, "V": v}) for b, k, v in shapes]


# The roofline is one rejected row per request, which the reference never exceeds; scoring every draft
# position reads 1.5x (128x2x129280) to 6x (32x8x151936) that. The outputs are a few tokens per request,
# so the per-(request, slice) partial winners are up to 3.6x their bytes on the GPU workloads: 16x leaves
# margin and still fails any vocabulary-wide buffer (residual weights, scores), 4*B*V bytes or more.
PROPERTIES = [
    DesignProperty("walk_before_race", "L1", "The acceptance walk runs first, and only the first rejected position "
                   "of each request has its target, draft and noise rows read: no position after it, none for a "
                   "request that accepts all", BytesNearRoofline(1.3)),
    DesignProperty("exponential_race", "L1", "The resample is one streaming argmax of max(p_target - p_draft, 0) / "
                   "q over the vocabulary: no normalisation, cumulative sum or sort"),
    DesignProperty("no_vocabulary_buffers", "L2", "No vocabulary-sized buffer (residual weights, scores) goes to "
                   "global memory: the only scratch is one partial winner, score and index, per request and slice",
                   NoLargeIntermediate(16)),
    DesignProperty("sliced_race_then_combine", "L2", "Rows are split into vocabulary slices, one program each, "
                   "every program repeating the cheap walk; one small kernel combines the partial winners and "
                   "writes the rows", MaxLaunches(2)),
    DesignProperty("first_max_tie_rule", "L3", "Ties go to the smallest token index within a tile, across tiles "
                   "(replace only on a strictly greater score) and across slices; masked lanes get a score below "
                   "any real one"),
    DesignProperty("device_side_sizes_int64_rows", "L3", "Draft counts and the rejection point are read in the "
                   "kernels (no host sync, the walk a runtime loop), and row offsets are formed in int64"),
]


TASK = TaskSpec(
    title="Speculative decoding rejection sampling",
    family="sampling",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("output_token_ids", torch.int32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=RejectionSampled(),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: a zero draft probability rejects by rule, never divides"),
        "output_scaled": WrongSolution(skip="the only output is integer token ids"),
    },
    design_properties=PROPERTIES,
)
