"""Rotary position embedding applied to q and k in place, cos/sin gathered by each token's position."""

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, PerOutput,
                           Roofline, TaskSpec, UpdatedInput, Workload, WrongSolution)
from d2k_env.tasks.normwise import NormwiseError

SOURCES = [
    "vLLM vllm/model_executor/layers/rotary_embedding (RotaryEmbedding.forward: neox style, in place)",
    "Liger-Kernel src/liger_kernel/ops/rope.py",
    "FlashAttention flash_attn/ops/triton/rotary.py",
]
DESCRIPTION = """
A batch of T tokens (several sequences of uneven lengths, each a run of consecutive positions from
its own start; two tokens may share a position) gets rotary position embeddings, neox style, on
every query and key head, in place, as vLLM's rotary embedding does before attention:
    positions [T] int64 (each in [0, P), P = 65536), q [T, Hq, d] bf16, k [T, Hkv, d] bf16 (updated in place),
    cos_sin_cache [P, d] bf16: row p holds cos(p * f_i) for i < d/2, then sin(p * f_i).
For each token t, with c = cos_sin_cache[positions[t], :d/2], s = cos_sin_cache[positions[t], d/2:],
and each head x (a [d] row of q[t] or k[t]) split into halves x1 = x[:d/2], x2 = x[d/2:]:
    x[:d/2] = x1 * c - x2 * s,   x[d/2:] = x2 * c + x1 * s
computed in fp32 and rounded once to bf16. forward returns an empty tuple, (): its result is q and
k as it leaves them (returning None, or q and k themselves, is refused).
"""

# Llama-3-8B prefill (32 q heads, 8 kv heads), a 64-head model's prefill, and its decode batch.
WORKLOADS = [
    Workload("T16384_Hq32_Hkv8", {"T": 16384, "Hq": 32, "Hkv": 8, "d": 128}),
    Workload("T8192_Hq64_Hkv8", {"T": 8192, "Hq": 64, "Hkv": 8, "d": 128}),
    Workload("T256_Hq64_Hkv8", {"T": 256, "Hq": 64, "Hkv": 8, "d": 128}),
]
# Head widths that are not powers of two (a half of 12 or 10 in a block of 16) and head counts that
# are not either, so a kernel's masks matter on the interpreter.
SMOKE_WORKLOADS = [
    Workload("T9_Hq3_Hkv1_d24", {"T": 9, "Hq": 3, "Hkv": 1, "d": 24}),
    Workload("T5_Hq5_Hkv2_d20", {"T": 5, "Hq": 5, "Hkv": 2, "d": 20}),
]


# The cache's rows: the model's longest context (Llama-3.1's 128K / 2). Positions anywhere in it, as
# a long-context batch has them: at small positions the slow frequencies (the last columns of each
# half) barely turn, and a kernel that never writes them would look right.
CACHE_ROWS = 65536


def draw_positions(T, P, gen, device):
    """Runs of consecutive positions (one per sequence, of uneven lengths), each from a random start;
    the first sequence starts at 0 (a rotation by nothing), the last where the second does (with three
    or more sequences, tokens share positions)."""
    idx = torch.arange(T, device=device)
    # A prefill batch has a few long sequences; a decode batch (T <= 512) one or two tokens each.
    starts = torch.rand(T, generator=gen, device=device) < (0.5 if T <= 512 else 4.0 / T)
    starts[0] = True
    seq = torch.cumsum(starts.long(), 0) - 1
    first = torch.cummax(torch.where(starts, idx, torch.zeros_like(idx)), 0).values
    offset = torch.randint(0, P - T, (T,), generator=gen, device=device)
    # The last sequence starts where the second does (shared positions), the first at 0.
    offset = torch.where(idx == seq[-1:], offset[1 % T], offset)
    offset[0] = 0
    return offset[seq] + idx - first


def make_inputs(w, gen, device):
    T, Hq, Hkv, d = (w[a] for a in ("T", "Hq", "Hkv", "d"))
    P = CACHE_ROWS
    positions = draw_positions(T, P, gen, device)
    # Head norms spanning orders of magnitude (e^{+-4}), and a zero q row and a zero k row.
    q = torch.randn(T, Hq, d, generator=gen, device=device) * torch.exp(1.5 * torch.randn(T, Hq, 1, generator=gen,
                                                                                           device=device))
    k = torch.randn(T, Hkv, d, generator=gen, device=device) * torch.exp(1.5 * torch.randn(T, Hkv, 1, generator=gen,
                                                                                            device=device))
    q[-1, 0] = 0.0
    k[0, -1] = 0.0
    # The rope base of the model, drawn from the range models use (10^4 for Llama-2, 5*10^5 for
    # Llama-3, 10^6 for Qwen): frequencies f_i = base^(-2i/d).
    base = 10.0 ** (4.0 + 2.0 * torch.rand((), generator=gen, device=device))
    inv_freq = base ** (-torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
    angles = torch.arange(P, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cache = torch.cat((angles.cos(), angles.sin()), dim=-1).to(torch.bfloat16)
    return positions, q.to(torch.bfloat16), k.to(torch.bfloat16), cache


def roofline(w):
    T, Hq, Hkv, d = (w[a] for a in ("T", "Hq", "Hkv", "d"))
    # Every head read and written once (bf16), one cos/sin row per token, its position.
    return Roofline(bytes=4 * T * (Hq + Hkv) * d + 2 * T * d + 8 * T, flops=3 * T * (Hq + Hkv) * d)


# A rotation keeps each head's norm, so each row's error is bounded by a fraction of its own norm.
# Computed in fp32 and rounded once, an element is off by half a bf16 step (2^-9 relative); a kernel
# that works in bf16 as Liger's does (x1*c and x2*s each rounded, then their difference) adds at
# most 2^-8 of |x1 c| + |x2 s| + |result| per element: under 3 * 2^-8 = 1.2% of the row's norm.
# 1.6% admits it; a rotation by the wrong angle (sin's sign flipped, the interleaved GPT-J pairing,
# cos/sin of another position) moves rows by tens of percent, an unrotated head by 2|sin(theta/2)|.
ROTATED = NormwiseError(0.016, floor=1e-3, why="a rotation in bf16 arithmetic keeps each head's norm to 3 bf16 "
                                                "roundings; a wrong angle or an unwritten head moves it by far more")

HELDOUT_SHAPES = ("any T from 1 to 65535, Hq >= 1, Hkv >= 1, d even (not only powers of two); submit also checks held-out "
                  "shapes drawn at random (two on the interpreter, three on the GPU), each long on one axis and "
                  "narrow on the others: one with more tokens than any workload, one with more heads, one with "
                  "wider heads")


def heldout_workloads(rng, smoke):
    """Past every workload of the backend on one axis each. On the interpreter the first has more
    tokens (programs) than any smoke workload, the second a head wider than 128 (a kernel with one
    fixed-width block along the head fails it)."""
    if smoke:
        shapes = [(rng.randint(13, 20), 1, 1, 8), (2, rng.randint(6, 7), 3, 2 * rng.randint(65, 80))]
    else:
        shapes = [(rng.randint(16385, 20000), 8, 1, 128), (rng.randint(1, 64), 96, rng.randint(9, 12), 128),
                  (rng.randint(64, 512), 8, 2, rng.choice((192, 256)))]
    return [Workload(f"T{t}_Hq{hq}_Hkv{hk}_d{d}", {"T": t, "Hq": hq, "Hkv": hk, "d": d}) for t, hq, hk, d in shapes]


_NO_OUTPUT = ("forward returns no output: q and k, the task's result, are updated inputs, checked after the call "
              "(tests/wrong_edits.py: rope_qk_inplace_k_unwritten leaves every row of k unwritten)")

# The task has no outputs (q and k are updated in place): NoLargeIntermediate's bound is then a fraction
# of a byte, so any buffer forward allocates fails it; the reference allocates none.
PROPERTIES = [
    DesignProperty("one_launch_q_and_k", "L1", "q and k are rotated in the same single launch, sharing each token's "
                   "position and cos/sin row, not one launch each", MaxLaunches(1)),
    DesignProperty("in_place_no_copies", "L1", "Each head is rotated where it lies: no rotate-half copy, "
                   "concatenation, copy of q or k, or cos/sin gathered and expanded per head is allocated",
                   NoLargeIntermediate(0.1)),
    DesignProperty("traffic_at_floor", "L1", "DRAM traffic is near the floor: every q and k head read once and "
                   "written once, plus one cos/sin row and one position per token", BytesNearRoofline(1.3)),
    DesignProperty("cache_row_once_per_token", "L2", "Each program owns one token: it loads the position and its "
                   "cos/sin row once and reuses them from registers for every query and key head of the token"),
    DesignProperty("head_tiles_by_strides", "L2", "A token's heads are a [heads, half-width] tile, looping over "
                   "head blocks inside the program (the grid is the token count), addressed through the tensors' "
                   "strides"),
    DesignProperty("masked_int64_offsets", "L3", "Blocks are next powers of two with every load and store masked on "
                   "head and column; the token index and the position are widened to int64 before multiplying "
                   "strides"),
]


TASK = TaskSpec(
    title="RoPE on q and k, in place",
    family="fusion",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput({"q": ROTATED, "k": ROTATED}),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    in_place_inputs=(1, 2),
    updated_inputs=(UpdatedInput(1, "q", torch.bfloat16), UpdatedInput(2, "k", torch.bfloat16)),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="a rotation divides by nothing: there is no epsilon"),
        "output_scaled": WrongSolution(skip=_NO_OUTPUT),
        "last_row_unwritten": WrongSolution(skip=_NO_OUTPUT),
        "fixed_width_block": WrongSolution(skip=_NO_OUTPUT + "; the reference with its half-head block fixed at 64 "
                                                            "fails the held-out shape with d past 128 (its slowest "
                                                            "frequencies unrotated, at positions up to 65536)"),
    },
    design_properties=PROPERTIES,
)
