"""DeepSeek-V3 grouped top-k MoE routing: sigmoid scores, bias-corrected group and expert selection."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, Roofline, TaskSpec,
                           Tolerance, Workload, WrongSolution)
from d2k_env.tasks.topk_sets import TopKSelection, is_grouped_top_k

SOURCES = [
    "vLLM vllm/model_executor/layers/fused_moe/fused_moe.py (grouped_topk; its fast path is a CUDA kernel)",
    "SGLang python/sglang/srt/layers/moe/topk.py (biased_grouped_topk)",
]
E = 256
N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
ROUTED_SCALING_FACTOR = 2.5
DESCRIPTION = f"""
Inputs: gating_output [T, {E}] fp32 (router logits), e_score_correction_bias [{E}] fp32. In fp32, per token:
    scores  = sigmoid(gating_output)
    biased  = scores + e_score_correction_bias
    the {E} experts form {N_GROUP} groups of {E // N_GROUP} consecutive ones; a group's score is the sum of its
    two largest biased values; keep the {TOPK_GROUP} groups of largest score
    topk_ids = the {TOP_K} experts of largest biased value within the kept groups
    topk_weights = scores[topk_ids] / sum(scores[topk_ids]) * {ROUTED_SCALING_FACTOR}   (unbiased scores)
Return (topk_weights [T, {TOP_K}] fp32, topk_ids [T, {TOP_K}] int32), topk_weights[t, j] the weight of
topk_ids[t, j]. The order of the {TOP_K} ids is free, and so is the choice among equal candidates (logits
and biases repeat, so groups and experts tie); each id at most once per row.
"""

WORKLOADS = [
    Workload("T128", {"T": 128}, launch_bound=True),
    Workload("T4096", {"T": 4096}),
    Workload("T32768", {"T": 32768}),
]
SMOKE_WORKLOADS = [
    Workload("T3", {"T": 3}),
    Workload("T13", {"T": 13}),
]


def make_inputs(w, gen, device):
    T = w["T"]
    # Router logits on a grid of 1/8: with 256 experts per row many values repeat, so experts tie at
    # the top-k boundary and groups tie on their scores, as quantised router outputs do.
    logits = torch.round(torch.randn(T, E, generator=gen, device=device) * 16.0) / 8.0
    # Padding tokens: all-zero logits, where every expert ties and only the bias separates them.
    if T > 1:
        pad = torch.rand(T, 1, generator=gen, device=device) < 1 / 16
        pad[torch.randint(T, (1,), generator=gen, device=device)] = True
        logits = logits.masked_fill(pad, 0.0)
    # The load-balancing bias on a grid of 1/32, mostly small: 9 values, so biased scores tie too.
    bias = torch.randint(-4, 5, (E,), generator=gen, device=device).float() / 32.0
    return logits, bias


def roofline(w):
    T = w["T"]
    # Read the fp32 logits (and the bias once); write k fp32 weights and k int32 ids per token.
    return Roofline(bytes=T * (4 * E + 8 * TOP_K) + 4 * E, flops=12 * T * E)


def keys(inputs):
    """The biased scores a selection is made on, in float64."""
    logits, bias = inputs
    return torch.sigmoid(logits.double()) + bias.double()


def valid(inputs, ids):
    # A kernel computes the keys in fp32 (a sigmoid and an add: about two ulps of values below 1.3);
    # candidates within 2^-20 of each other count as tied. Distinct logits on the 1/8 grid differ by
    # far more, so every input tie is an exact one and nothing else is.
    return is_grouped_top_k(keys(inputs), ids, N_GROUP, TOPK_GROUP, 2, tol=2.0 ** -20)


def weights_of(inputs, ids):
    scores = torch.sigmoid(inputs[0].double()).gather(1, ids)
    return scores / scores.sum(-1, keepdim=True) * ROUTED_SCALING_FACTOR


# Weights are k positive fp32 scores over their fp32 sum, times a constant: a few fp32 roundings
# (1e-7 relative each) whatever the order. 1e-5 relative admits a different sigmoid lowering, not a
# bf16 step (4e-3) or weights from the biased scores.
CHECK = TopKSelection(
    ids="topk_ids", weights="topk_weights", n_candidates=lambda inputs: inputs[0].shape[1], valid=valid,
    weights_of=weights_of, weight_check=Tolerance(1e-6, 1e-5, why="a few fp32 roundings"),
    rule=f"the {TOPK_GROUP} best groups by the sum of their two best biased scores, then the {TOP_K} best biased "
         f"scores in them; candidates within 2^-20 count as tied")

HELDOUT_SHAPES = ("any T >= 1 with these experts and groups; submit also checks held-out token counts drawn at random: "
                  "one more than any workload of the backend, and a few small ones")


def heldout_workloads(rng, smoke):
    if smoke:
        counts = [rng.randint(14, 24), rng.randint(1, 2), rng.randint(5, 12)]
    else:
        counts = [rng.randint(32769, 40000), rng.randint(1, 7), rng.randint(129, 1500)]
    return [Workload(f"T{t}", {"T": t}) for t in counts]


TASK = TaskSpec(
    title="Grouped top-k MoE router",
    family="moe",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("topk_weights", torch.float32), Output("topk_ids", torch.int32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "float32", "int32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        # Small batches run one token per program (no partial block): four per program on the smoke
        # shapes, so 13 and 3 tokens leave a tail.
        "tail_mask_dropped": WrongSolution(edits=(("SMALL_T = 1024", "SMALL_T = 0"),)),
        "eps_removed": WrongSolution(skip="no epsilon: the weights divide by a sum of k sigmoids, never 0"),
        "fixed_width_block": WrongSolution(skip=f"every row is {TOP_K} wide on every shape: one block of that width "
                                                "is the honest kernel"),
    },
    design_properties=[
        DesignProperty("one_pass_per_token", "L1",
                       "Sigmoid, bias, group scores, group and expert choice, weight gather and renormalisation all "
                       "happen in one kernel: a single launch per call",
                       MaxLaunches(1)),
        DesignProperty("weights_from_unbiased_scores", "L1",
                       "The bias steers only the choice: the weights are the chosen experts' unbiased sigmoid scores, "
                       "renormalised over the k and scaled, in fp32"),
        DesignProperty("consistent_tie_break", "L1",
                       "Every top-k round takes the maximum, then the lowest index holding it, then masks that "
                       "candidate out: ties go to the lower index and no candidate is taken twice"),
        # 1x the outputs (k weights and ids per token, 64 B): a [T, E] tensor is 16x them; the reference has none.
        DesignProperty("only_ids_and_weights_in_memory", "L2",
                       "No [T, E] intermediate (scores, biased scores, masks, a masked copy) exists in memory: the "
                       "logits are read once and only the ids and weights are written",
                       NoLargeIntermediate(1.0)),
        DesignProperty("group_tile_in_registers", "L2",
                       "Logits are held as a [tokens, groups, experts-per-group] register tile; group scores (top two "
                       "per group) are reductions along its contiguous innermost axis"),
        DesignProperty("rows_per_program_by_batch", "L3",
                       "Rows per program are chosen on the host from the token count: one row per program for decode "
                       "batches, a few rows per program for large ones; no autotuning, no host synchronisation"),
    ],
)
