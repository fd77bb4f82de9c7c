"""Multi-LoRA SGMV (Punica): every token's adapter, shrink and expand, added to the base layer's output."""

import torch

from d2k_env.tasks import (AccumulationBound, DesignProperty, Heldout, MaxLaunches, Output, Roofline, TaskSpec,
                           UsesDot, Workload, WrongSolution)

SOURCES = [
    "vLLM vllm/lora/ops/triton_ops/lora_shrink_op.py, lora_expand_op.py, kernel_utils.py (Punica SGMV in Triton)",
    "vLLM vllm/lora/punica_wrapper (token metadata sorted by adapter once per batch)",
    "Punica (Chen et al., 2023): segmented gather matrix-vector multiplication",
]
DESCRIPTION = """
Inputs (T tokens, L adapter slots, rank R, hidden size H, S output slices of width NS, N = S * NS):
    x             [T, H] bfloat16         the layer's input
    base          [T, N] bfloat16         the base layer's output
    lora_a        [S, L, R, H] bfloat16   shrink weights (A) per slice and adapter
    lora_b        [S, L, NS, R] bfloat16  expand weights (B) per slice and adapter
    scales        [L] float32             each adapter's scaling (alpha / rank)
    token_lora    [T] int32               each token's adapter, -1 for none; tokens are in arrival order
    sorted_tokens [T] int32               token indices ordered by adapter (stable), the -1 tokens last
    lora_start    [L + 1] int32           adapter l's tokens are sorted_tokens[lora_start[l] : lora_start[l + 1]];
                                          the tokens with no adapter are sorted_tokens[lora_start[L] :]
The three index inputs describe the same batch (they are computed once per batch and shared by every layer).
Some adapters have no tokens; the others have uneven counts. For every slice s and token t with adapter l >= 0:
    y[t, s*NS:(s+1)*NS] = base[t, s*NS:(s+1)*NS] + scales[l] * (x[t] @ lora_a[s, l]^T) @ lora_b[s, l]^T
and y[t] = base[t] for tokens with no adapter. Return y [T, N] bfloat16 (base is left unchanged). The
intermediate x @ A^T may be rounded to bf16 before the expand, as Punica does.
"""

# Named T x L x rank; the other sizes are in the parameters.
WORKLOADS = [
    Workload("256x8x16", {"T": 256, "L": 8, "R": 16, "H": 4096, "S": 1, "NS": 4096}, launch_bound=True),
    Workload("4096x32x64", {"T": 4096, "L": 32, "R": 64, "H": 4096, "S": 2, "NS": 14336}),
    Workload("64x16x16", {"T": 64, "L": 16, "R": 16, "H": 8192, "S": 1, "NS": 8192}, launch_bound=True),
]
# Ragged everything: token counts that fill no tile, H and NS of no power of two, a rank below the MMA's 16.
SMOKE_WORKLOADS = [
    Workload("37x4x8", {"T": 37, "L": 4, "R": 8, "H": 96, "S": 1, "NS": 40}),
    Workload("50x3x16", {"T": 50, "L": 3, "R": 16, "H": 64, "S": 2, "NS": 24}),
]


def make_inputs(w, gen, device):
    T, L, R, H, S, NS = (w[k] for k in ("T", "L", "R", "H", "S", "NS"))
    x = torch.randn(T, H, generator=gen, device=device) * torch.exp(0.5 * torch.randn(T, 1, generator=gen, device=device))
    base = torch.randn(T, S * NS, generator=gen, device=device)
    lora_a = torch.randn(S, L, R, H, generator=gen, device=device) / H ** 0.5
    # B starts at zero in training and stays small; adapters differ in magnitude.
    lora_b = 0.05 * torch.randn(S, L, NS, R, generator=gen, device=device)
    lora_b = lora_b * torch.exp(torch.randn(S, L, 1, 1, generator=gen, device=device))
    scales = 2.0 ** torch.randint(-2, 3, (L,), generator=gen, device=device).float()
    # Adapter popularity is skewed; about a quarter of the slots (one at least) have no token this batch,
    # and about one token in ten (one at least) uses no adapter.
    weight = torch.exp(1.5 * torch.randn(L, generator=gen, device=device))
    slot = torch.arange(L, device=device)
    forced_idle = torch.randint(L, (1,), generator=gen, device=device)
    forced_busy = (forced_idle + 1 + torch.randint(max(L - 1, 1), (1,), generator=gen, device=device)) % L
    idle = ((torch.rand(L, generator=gen, device=device) < 0.25) | (slot == forced_idle)) & (slot != forced_busy)
    weight = torch.where(idle, torch.zeros_like(weight), weight)
    token_lora = torch.multinomial(weight, T, replacement=True, generator=gen)
    none = torch.rand(T, generator=gen, device=device) < 0.1
    none[torch.randint(T, (1,), generator=gen, device=device)] = True
    token_lora = torch.where(none, torch.full_like(token_lora, -1), token_lora)
    key = torch.where(token_lora < 0, torch.full_like(token_lora, L), token_lora)
    order = torch.sort(key, stable=True)
    lora_start = torch.searchsorted(order.values, torch.arange(L + 1, device=device))
    return (x.to(torch.bfloat16), base.to(torch.bfloat16), lora_a.to(torch.bfloat16), lora_b.to(torch.bfloat16),
            scales, token_lora.to(torch.int32), order.indices.to(torch.int32), lora_start.to(torch.int32))


def roofline(w):
    T, L, R, H, S, NS = (w[k] for k in ("T", "L", "R", "H", "S", "NS"))
    # x once, base read and y written, every adapter's A and B at most once (idle ones need not be read).
    weights = 2 * S * L * R * (H + NS)
    return Roofline(bytes=2 * T * H + 4 * T * S * NS + weights + 12 * T, flops=2 * T * S * R * (H + NS))


# Bound, per element of y, with h = x A^T (fp32) and |.| elementwise:
#   rel * scales[l] * (|h| @ |B|^T  +  2^-3 * (|x| @ |A|^T) @ |B|^T)
# The first term covers bf16 roundings of h and of the delta, on both sides (the baseline rounds h, h B^T
# and its product with the scale; a kernel may round h): four roundings of 2^-9 each, rel = 2^-7. The second
# covers the shrink's own accumulation (cuBLAS may reduce split-K partials of the skinny x A^T in bf16):
# 2^-10 of its terms' magnitudes. Tokens with no adapter get one bf16 step: y is base there.
REL = 2.0 ** -7


def terms(inputs):
    x, base, lora_a, lora_b, scales, token_lora, sorted_tokens, lora_start = inputs
    S, L = lora_a.shape[:2]
    NS = lora_b.shape[2]
    out = torch.zeros(base.shape, dtype=torch.float32, device=base.device)
    xf = x.float()
    for s in range(S):
        for lora in range(L):
            rows = (token_lora == lora).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            a, b = lora_a[s, lora].float(), lora_b[s, lora].float().abs()
            h = (xf[rows] @ a.t()).abs() + 2.0 ** -3 * (xf[rows].abs() @ a.abs().t())
            out[rows, s * NS:(s + 1) * NS] = scales[lora].abs() * (h @ b.t())
    return out


CHECK = AccumulationBound("y", terms, REL, why="the LoRA delta's bf16 roundings of x A^T, of the delta and of "
                                               "the shrink's partial sums, on both sides; y is base where a token "
                                               "has no adapter",
                          measure="scales[l] * (|x A^T| + 2^-3 |x| |A|^T) |B|^T, the magnitudes of the delta's terms")

HELDOUT_SHAPES = ("any T >= 1, L >= 1, R >= 1, H >= 1, S >= 1 and NS >= 1; submit also checks three held-out shapes "
                  "drawn at random, each long on some axes and narrow on the others: more tokens and more adapter "
                  "slots, a larger rank and more slices, and a wider input and output than any workload of the backend")


def heldout_workloads(rng, smoke):
    """Three shapes that together pass every workload of the backend on every axis (the spec checks it),
    each narrow where it is not long. The first has more tokens than any smoke workload tiles."""
    if smoke:
        shapes = [(rng.randint(100, 160), rng.randint(5, 8), 8, 32, 1, 16),
                  (rng.randint(4, 12), 2, rng.randint(17, 40), 16, 3, 8),
                  (rng.randint(2, 8), 2, 8, rng.randint(97, 300), 1, rng.randint(41, 200))]
    else:
        shapes = [(rng.randint(4097, 8192), rng.randint(33, 64), 16, 128, 1, 128),
                  (rng.randint(16, 256), 4, rng.randint(65, 128), 256, 3, rng.randint(10923, 12000)),
                  (rng.randint(16, 64), 4, 16, rng.randint(8193, 12288), 1, rng.randint(14337, 16384))]
    return [Workload(f"{t}x{n}x{r}x{h}to{s}x{ns}", {"T": t, "L": n, "R": r, "H": h, "S": s, "NS": ns})
            for t, n, r, h, s, ns in shapes]


TASK = TaskSpec(
    title="Multi-LoRA SGMV (shrink and expand)",
    family="gemm",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("y", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "zeros", "bfloat16", "float32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="nothing is divided"),
        "output_scaled": WrongSolution(skip="the one output is bf16: 1e-3 of it is a quarter of a step"),
        "fixed_width_block": WrongSolution(skip="it keeps the first 32768 columns, so only a held-out shape wider than "
                                                "that fails it, hundreds of programs per evaluation on the "
                                                "interpreter. The GPU draw has such a shape"),
    },
    design_properties=[
        # One shrink and one expand launch: a per-adapter loop launches 2 * L or more.
        DesignProperty("one_launch_per_stage", "L1",
                       "Every adapter's work is done in one launch per stage (shrink, expand): at most two launches "
                       "per call, no loop over adapters",
                       MaxLaunches(2)),
        DesignProperty("shrink_then_expand", "L1",
                       "The delta is (x A^T) B^T: the shrink reduces H to r fp32 values per token and the expand "
                       "widens them; no per-adapter product B A is formed"),
        DesignProperty("base_added_in_expand", "L1",
                       "The expand adds the scaled delta to base in fp32 registers and rounds once, writing each "
                       "output row once: no delta tensor, no initialisation pass over y"),
        DesignProperty("segment_row_tiles", "L2",
                       "Row tiles cover the adapter segments of the sorted order (about T / BLOCK_M + L + 1 of them, "
                       "each in one segment), rows gathered through sorted_tokens; no adapters x T grid"),
        DesignProperty("rank_one_tile_on_mma", "L3",
                       "Both stages use tl.dot on bf16 tiles, the rank padded to the MMA minimum as one tile, so the "
                       "expand has no K loop",
                       UsesDot()),
        DesignProperty("config_from_shapes", "L3",
                       "Row tile, rank tile and the split of H for a skinny shrink are chosen on the host from shapes "
                       "alone: no autotuning, no host synchronisation"),
    ],
)
