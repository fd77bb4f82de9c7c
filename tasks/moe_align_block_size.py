"""MoE block alignment: token slots sorted by expert, each expert padded to whole GEMM blocks."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, Roofline, TaskSpec,
                           Workload, WrongSolution)
from d2k_env.tasks.order_free import OrderFreeWithin

SOURCES = [
    "SGLang python/sglang/srt/layers/moe/fused_moe_triton/moe_align_block_size.py",
    "vLLM vllm/model_executor/layers/fused_moe/moe_align_block_size.py (its fast path is a CUDA kernel)",
]
DESCRIPTION = """
Inputs: topk_ids [T, k] int32 (each token's k distinct experts, in [0, E)), E (int), block_size (int, a power
of two). Slot i = t * k + j is token t's j-th choice; numel = T * k. Each expert's slots are padded up to a
multiple of block_size and the experts laid out in order:
    counts[e] = number of slots with expert e;  padded[e] = ceil(counts[e] / block_size) * block_size
    start[e] = padded[0] + ... + padded[e - 1];  total = start[E - 1] + padded[E - 1]
Return (sorted_token_ids [numel + E * (block_size - 1)] int32, expert_ids [ceil(that / block_size)] int32,
num_tokens_post_pad [1] int32):
    sorted_token_ids[start[e] : start[e] + counts[e]] = the slots of expert e, in any order;
    every other entry (each expert's padding, and everything from total on) = numel;
    expert_ids[b] = the expert whose padded range holds block b, or -1 for b >= total / block_size;
    num_tokens_post_pad[0] = total.
Some experts receive no token (their range is empty).
"""

WORKLOADS = [
    Workload("T4096_E8_k2_b64", {"T": 4096, "E": 8, "k": 2, "block": 64}),
    Workload("T4096_E128_k8_b64", {"T": 4096, "E": 128, "k": 8, "block": 64}),
    Workload("T16384_E256_k8_b128", {"T": 16384, "E": 256, "k": 8, "block": 128}),
    Workload("T64_E256_k8_b16", {"T": 64, "E": 256, "k": 8, "block": 16}, launch_bound=True),
]
SMOKE_WORKLOADS = [
    Workload("T37_E8_k2_b16", {"T": 37, "E": 8, "k": 2, "block": 16}),
    Workload("T21_E12_k3_b8", {"T": 21, "E": 12, "k": 3, "block": 8}),
]


def make_inputs(w, gen, device):
    T, E, k = w["T"], w["E"], w["k"]
    # Routers pick k distinct experts per token with skewed popularity (a Gumbel top-k over Zipf-like
    # log-probabilities on a random ranking), and about one expert in eight gets no token at all.
    rank = torch.randperm(E, generator=gen, device=device) if gen is not None else torch.arange(E, device=device)
    log_p = -torch.log1p(rank.float())
    cold = rank >= E - max(1, min(E // 8, E - k))
    log_p = log_p.masked_fill(cold, float("-inf"))
    u = torch.rand(T, E, generator=gen, device=device).clamp(min=1e-12)
    keys = log_p - torch.log(-torch.log(u))
    return keys.topk(k, dim=-1).indices.to(torch.int32), E, w["block"]


def roofline(w):
    numel, E, bs = w["T"] * w["k"], w["E"], w["block"]
    n_sorted = numel + E * (bs - 1)
    # Read the ids; write the sorted slots, the block experts and the total.
    return Roofline(bytes=4 * numel + 4 * n_sorted + 4 * -(-n_sorted // bs) + 4, flops=numel)


def segments(inputs, expected):
    """Each token slot's segment is its block's expert; padding entries are fixed (-1)."""
    topk_ids, _, block = inputs
    ids = expected["sorted_token_ids"].long()
    owner = expected["expert_ids"].long()[torch.arange(ids.numel(), device=ids.device) // block]
    return torch.where(ids == topk_ids.numel(), -1, owner)


CHECK = OrderFreeWithin("sorted_token_ids", segments, "one expert's slots (its tokens before its padding)")

HELDOUT_SHAPES = ("any T >= 1, E >= 1, 1 <= k <= E and block_size a power of two; submit also checks held-out shapes "
                  "drawn at random, each past every workload of the backend on one axis (tokens, experts, k, block) "
                  "and small on the others")


def heldout_workloads(rng, smoke):
    if smoke:
        shapes = [(rng.randint(38, 90), 8, 2, 16), (9, rng.randint(13, 40), 2, 8), (7, 6, rng.randint(4, 6), 4),
                  (5, 4, 2, 32)]
    else:
        shapes = [(rng.randint(16385, 20000), 64, 4, 64), (32, rng.randint(257, 512), 8, 16),
                  (128, 64, rng.randint(9, 16), 32), (256, 32, 4, 256)]
    return [Workload(f"T{t}_E{e}_k{k}_b{b}", {"T": t, "E": e, "k": k, "block": b}) for t, e, k, b in shapes]


TASK = TaskSpec(
    title="MoE align block size",
    family="moe",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("sorted_token_ids", torch.int32), Output("expert_ids", torch.int32),
             Output("num_tokens_post_pad", torch.int32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "zeros", "int32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="integer counting: no epsilon"),
        "output_scaled": WrongSolution(skip="integer outputs only: nothing to scale by 1 + 1e-3"),
        "fixed_width_block": WrongSolution(
            skip="sorted_token_ids is one flat list of T*k + E*(block-1) entries: a fixed-width block past the GPU "
                 "workloads' length (262144) is too long for the interpreter's held-out shapes; grid_capped "
                 "catches a kernel that covers a fixed span"),
    },
    design_properties=[
        DesignProperty("counting_sort", "L1",
                       "A counting sort: a histogram of slots per expert, a scan of the block-padded counts and a "
                       "scatter, each linear in the slots; no comparison sort (argsort, torch.sort) of the ids"),
        # 0.5 of the outputs: the reference's only scratch, 2E counters, is at most 0.14x of them; a one-hot
        # [slots, E] matrix exceeds 0.5 on every workload, an argsort's int64 indices on all but the decode one.
        DesignProperty("only_expert_counters", "L2",
                       "Besides the outputs only O(E) scratch is allocated (counts, next free positions): no one-hot "
                       "[slots, E] matrix, rank array or sorted copy of the ids",
                       NoLargeIntermediate(0.5)),
        # Count, layout (which rescans the counts itself) and scatter; a single-program kernel with barriers is 1.
        DesignProperty("scan_inside_layout_pass", "L2",
                       "Every layout program rescans the few hundred counts in registers rather than a separate scan "
                       "launch, and writes the sentinels itself: at most three launches per call",
                       MaxLaunches(3)),
        DesignProperty("atomic_positions", "L3",
                       "The scatter takes each slot's position from the value returned by an atomic add on its "
                       "expert's next-free counter: no within-expert ranking or prefix sum"),
        DesignProperty("block_owner_by_compare", "L3",
                       "A block's expert is the count of range ends at or before its first position (a [blocks, "
                       "experts] compare summed per row), the expert axis padded to a power of two and masked"),
        DesignProperty("no_host_sync", "L3",
                       "Grids and buffers are sized from shapes alone (the worst-case padded length), never from the "
                       "ids: no host synchronisation in forward"),
    ],
)
