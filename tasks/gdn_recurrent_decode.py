"""Gated delta rule (Qwen3-Next linear attention): one decode step on a pool of recurrent states."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           PerOutput, Roofline, TaskSpec, Tolerance, UpdatedInput, Workload, WrongSolution)

SOURCES = [
    "vLLM vllm/model_executor/layers/fla/ops/fused_recurrent.py (fused_recurrent_gated_delta_rule)",
    "flash-linear-attention fla/ops/gated_delta_rule/fused_recurrent.py",
]
DESCRIPTION = """
A batch of B requests each brings T new tokens (T = 1 for decode, a few for multi-token steps) to a
gated delta-rule layer whose recurrent states live in a pool:
    q, k [B, T, H, K] bf16, v [B, T, HV, V] bf16 (HV value heads; value head j uses q/k head j // (HV / H)),
    g [B, T, HV] fp32 (log of the per-token decay, < 0), beta [B, T, HV] bf16 (write strength in (0, 1)),
    state [N, HV, K, V] fp32 (the pool), state_indices [B] int32 (request b's slot; distinct, any order).
For each request b and value head j, with S = state[state_indices[b], j] and, for t = 0 .. T-1 in order:
    q_t = q[b,t,h] / sqrt(|q[b,t,h]|^2 + 1e-6) * K^-0.5,  k_t = k[b,t,h] / sqrt(|k[b,t,h]|^2 + 1e-6)
    S = S * exp(g[b,t,j])
    delta = (v[b,t,j] - k_t^T S) * beta[b,t,j]          (a [V] vector)
    S = S + k_t delta^T                                   (rank-1 update)
    o[b,t,j] = q_t^T S                                    (in fp32, rounded once)
then write S back to state[state_indices[b], j] in place (the other slots stay as they are).
Return o [B, T, HV, V] bf16.
"""

# Qwen3-Next: 16 q/k heads, 32 value heads, K = V = 128. The pool has more slots than the batch
# (requests of other steps keep theirs), and a request's slot is anywhere in it.
WORKLOADS = [
    Workload("B64_T1", {"B": 64, "T": 1, "H": 16, "HV": 32, "K": 128, "V": 128}),
    Workload("B256_T1", {"B": 256, "T": 1, "H": 16, "HV": 32, "K": 128, "V": 128}),
    Workload("B32_T4", {"B": 32, "T": 4, "H": 16, "HV": 32, "K": 128, "V": 128}),
]
SMOKE_WORKLOADS = [
    Workload("B3_T2_H2_HV4_K32_V40", {"B": 3, "T": 2, "H": 2, "HV": 4, "K": 32, "V": 40}),
    Workload("B2_T1_H1_HV3_K16_V24", {"B": 2, "T": 1, "H": 1, "HV": 3, "K": 16, "V": 24}),
]


def pool_slots(B):
    """The pool's size: the batch's slots are scattered among more than twice as many."""
    return 2 * B + 5


def make_inputs(w, gen, device):
    B, T, H, HV, K, V = (w[a] for a in ("B", "T", "H", "HV", "K", "V"))
    bf16 = torch.bfloat16
    q = torch.randn(B, T, H, K, generator=gen, device=device)
    k = torch.randn(B, T, H, K, generator=gen, device=device)
    # Norms spanning orders of magnitude (the kernel normalises), and a zero q and a zero k row (a
    # padded token): the norm's epsilon keeps them 0, not NaN.
    q = q * torch.exp(2.0 * torch.randn(B, T, H, 1, generator=gen, device=device))
    k = k * torch.exp(2.0 * torch.randn(B, T, H, 1, generator=gen, device=device))
    q[-1, -1, 0] = 0.0
    k[0, 0, -1] = 0.0
    v = torch.randn(B, T, HV, V, generator=gen, device=device).to(bf16)
    # Decay exp(g) from ~0.9999 (slow heads) to ~1e-4 (fast ones): g = -exp(u), u in [-9, 2.3).
    g = -torch.exp(-9.0 + 11.3 * torch.rand(B, T, HV, generator=gen, device=device))
    beta = torch.sigmoid(2.0 * torch.randn(B, T, HV, generator=gen, device=device)).to(bf16)
    N = pool_slots(B)
    # Past states are sums of decayed rank-1 updates of unit-norm keys: entries of order 0.1-1.
    state = 0.3 * torch.randn(N, HV, K, V, generator=gen, device=device)
    slots = torch.randperm(N, generator=gen, device=device)[:B]
    state.index_fill_(0, slots[-1:], 0.0)  # a request starting now: its state is still zero
    return q.to(bf16), k.to(bf16), v, g, beta, state, slots.to(torch.int32)


def roofline(w):
    B, T, H, HV, K, V = (w[a] for a in ("B", "T", "H", "HV", "K", "V"))
    # The state slice of each (request, value head) read and written once; q, k, v, o, g, beta once.
    state_bytes = 2 * B * HV * K * V * 4
    token_bytes = B * T * (2 * H * K * 2 + 2 * HV * V * 2 + HV * (4 + 2))
    # Per token and value head: decay (KV), prediction (2KV), update (2KV), readout (2KV).
    return Roofline(bytes=state_bytes + token_bytes + B * 4, flops=7 * B * T * HV * K * V)


# The state is a decayed sum of T rank-1 updates per call; each entry moves by a few fp32 roundings
# of terms of order 1 (the prediction k^T S sums K products, each exact to 6e-8 relative: about
# 1e-6 absolute at K = 128, fed once per token into the update). 1e-5 + 1e-5 * |expected| leaves
# ten times that; storing the state as bf16 (3.9e-3 relative) or an fp16 round trip (4.9e-4) fails.
STATE_CHECK = Tolerance(1e-5, 1e-5, why="a few fp32 roundings per token; a bf16 or fp16 state does not fit")

HELDOUT_SHAPES = ("any B >= 1, T >= 1, H >= 1, HV a multiple of H, K and V >= 1 (not only powers of two), any pool "
                  "size and slot order; submit also checks held-out shapes drawn at random (two on the interpreter, "
                  "three on the GPU), each long on one axis and narrow on the others: one with more requests than "
                  "any workload, one with more tokens per request and more heads, one with wider K and V")


def heldout_workloads(rng, smoke):
    """Past every workload of the backend on one axis each, narrow on the others. On the
    interpreter the second has V past 128, the widest value head of any workload (a kernel with
    one fixed-width block along V fails it), and the first more (request, head) programs than any
    smoke workload launches (a capped grid fails it)."""
    if smoke:
        shapes = [(rng.randint(13, 16), 1, 1, 1, 16, 16),
                  (1, rng.randint(3, 4), 3, 6, rng.choice((33, 48)), rng.randint(129, 144))]
    else:
        shapes = [(rng.randint(257, 320), 1, 16, 32, 128, 128),
                  (rng.randint(1, 4), rng.randint(5, 8), 20, 40, 128, 128),
                  (rng.randint(1, 8), 1, 4, 8, rng.choice((160, 192, 256)), rng.choice((144, 192, 256)))]
    return [Workload(f"B{b}_T{t}_H{h}_HV{hv}_K{kd}_V{vd}", {"B": b, "T": t, "H": h, "HV": hv, "K": kd, "V": vd})
            for b, t, h, hv, kd, vd in shapes]


TASK = TaskSpec(
    title="Gated delta rule: recurrent decode step",
    family="attention",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("o", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput({"state": STATE_CHECK}),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    in_place_inputs=(5,),
    updated_inputs=(UpdatedInput(5, "state", torch.float32),),
    # The roofline is the state read and written once plus the token vectors: what a fused step
    # moves (q and k re-read per value band come from L2). A gathered copy of the states is
    # hundreds of times o's bytes (B * HV * K * V fp32 against B * T * HV * V bf16).
    design_properties=[
        DesignProperty("fused_single_pass", "L1",
                       "One launch per call: each state slice is read once, every token of the request applied "
                       "to it in registers, written back once, outputs emitted on the way",
                       MaxLaunches(1)),
        DesignProperty("state_traffic_at_roofline", "L1",
                       "DRAM traffic is one fp32 read and one write of each request's state plus the token "
                       "vectors, not a dozen state-sized passes as in eager",
                       BytesNearRoofline(1.5)),
        DesignProperty("no_state_copies", "L2",
                       "No gathered, decayed or updated copy of the states is allocated; the state is updated in "
                       "place at its request's slot, in fp32",
                       NoLargeIntermediate(1.0)),
        DesignProperty("delta_rule_order", "L2",
                       "Per token: decay S, predict k.S from the decayed state, apply the beta-scaled rank-1 "
                       "correction, then read out q.S from the updated state; q and k L2-normalised in-kernel"),
        DesignProperty("value_band_grid", "L3",
                       "Grid of (value band, request x value head), bands fastest; a program holds all padded K "
                       "rows by one band of V columns, K masked to a power of two"),
        DesignProperty("wide_slot_offsets", "L3",
                       "The slot index is widened to 64 bits before it is multiplied by HV * K * V for the state's "
                       "address, used for both the load and the store"),
    ],
    wrong_solutions={
        "output_scaled": WrongSolution(skip="the only output is bf16 (a 1e-3 scale is a quarter of a step); the fp32 "
                                            "state is an updated input, whose bf16 rounding test_in_place_inputs "
                                            "fails"),
    },
)
