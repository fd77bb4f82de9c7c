"""The WY representation's triangular inverse of gated delta-rule attention: (I + A)^-1 per chunk and head."""

import math

import torch

from d2k_env.tasks import (BytesNearRoofline, DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output,
                           Roofline, TaskSpec, UsesDot, Workload, WrongSolution)
from d2k_env.tasks.inverse_residual import InverseResidual

CHUNK = 64
HEAD_DIM = 128

SOURCES = [
    "flash-linear-attention fla/ops/utils/solve_tril.py",
    "flash-linear-attention fla/ops/common/chunk_scaled_dot_kkt.py (the A it inverts)",
]
DESCRIPTION = f"""
Chunked gated delta-rule attention splits each sequence into chunks of {CHUNK} tokens (the last one of a
sequence may be shorter) and needs, per chunk and head, the inverse of a unit lower-triangular matrix.
Inputs (a varlen batch packed as one; sequence s holds tokens cu_seqlens[s] .. cu_seqlens[s+1]-1):
    k [1, T, H, {HEAD_DIM}] bf16 (L2-normalised keys), beta [1, T, H] bf16, g [1, T, H] fp32 (the
    cumulative sum of log decays within each chunk), cu_seqlens [S + 1] int64.
For a chunk of L tokens starting at token t0, rows and columns i, j < L are the tokens t0 + i, t0 + j:
    A[i, j] = beta[i] * (k[i] . k[j]) * exp(g[i] - g[j])  for j < i, 0 otherwise   (in fp32 or better;
              beta[i] * k[i] may be rounded to bf16 first, as flash-linear-attention feeds its dot)
    X = (I + A)^-1                                                                   (unit lower-triangular)
Return Ai [1, T, H, {CHUNK}] fp32: Ai[0, t0 + i, h, j] = X[i, j] for j < L, and 0 for j >= L.
"""

WORKLOADS = [
    Workload("8192x32", {"T": 8192, "H": 32, "S": 1}),
    Workload("32768x32", {"T": 32768, "H": 32, "S": 1}),
    Workload("16384x16-s12", {"T": 16384, "H": 16, "S": 12}),
]
SMOKE_WORKLOADS = [
    Workload("200x2-s4", {"T": 200, "H": 2, "S": 4}),
    Workload("130x2", {"T": 130, "H": 2, "S": 1}),
]


def chunk_tokens(cu_seqlens):
    """[C, CHUNK] int64: the token of each row of each chunk, -1 past a short chunk's end."""
    bounds = cu_seqlens.tolist()
    starts, ends = [], []
    for s in range(len(bounds) - 1):
        for t0 in range(bounds[s], bounds[s + 1], CHUNK):
            starts.append(t0)
            ends.append(min(t0 + CHUNK, bounds[s + 1]))
    device = cu_seqlens.device
    rows = torch.tensor(starts, device=device, dtype=torch.int64)[:, None] + torch.arange(CHUNK, device=device)
    return torch.where(rows < torch.tensor(ends, device=device, dtype=torch.int64)[:, None], rows, -1)


def make_inputs(w, gen, device):
    T, H, S = w["T"], w["H"], w["S"]
    if device.type == "meta":
        return (torch.empty(1, T, H, HEAD_DIM, dtype=torch.bfloat16, device=device),
                torch.empty(1, T, H, dtype=torch.bfloat16, device=device), torch.empty(1, T, H, device=device),
                torch.empty(S + 1, dtype=torch.int64, device=device))
    # Uneven sequence lengths: S - 1 distinct cut points (lengths from 1 token up).
    cuts = (torch.randperm(T - 1, generator=gen, device=device)[:S - 1] + 1).sort().values
    cu = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), T)]).to(torch.int64)
    k = torch.randn(1, T, H, HEAD_DIM, generator=gen, device=device)
    k = (k / k.norm(dim=-1, keepdim=True)).to(torch.bfloat16)
    beta = torch.sigmoid(2.0 * torch.randn(1, T, H, generator=gen, device=device)).to(torch.bfloat16)
    # Per-token log decays, each head with its own rate (log-uniform over 1e-3 .. 1 per token): from
    # heads that barely forget to heads whose within-chunk decay reaches exp(-64).
    rate = torch.exp(torch.empty(1, 1, H, device=device).uniform_(math.log(1e-3), 0.0, generator=gen))
    log_decay = -rate * torch.rand(1, T, H, generator=gen, device=device, dtype=torch.float64)
    rows = chunk_tokens(cu)
    padded = torch.where(rows >= 0, rows, T)
    per_chunk = torch.cat([log_decay[0], log_decay.new_zeros(1, H)])[padded].cumsum(dim=1)   # [C, CHUNK, H]
    g = torch.empty(T, H, device=device, dtype=torch.float64)
    g[rows[rows >= 0]] = per_chunk[rows >= 0]
    return k, beta, g.float()[None], cu


def roofline(w):
    T, H = w["T"], w["H"]
    # Keys read (bf16), beta and g read, the fp32 inverse rows written; the lower half of K K^T per chunk,
    # and about n^3 / 3 for the inverse.
    return Roofline(bytes=T * H * (2 * HEAD_DIM + 2 + 4 + 4 * CHUNK), flops=T * H * (CHUNK * HEAD_DIM + CHUNK ** 2 // 3))


def inverse_blocks(inputs, out):
    """(M, X, zero) for InverseResidual: every (chunk, head) matrix I + A in float64 from the inputs,
    the solution's X, and the entries fixed at 0 (above the diagonal, and columns past a short chunk's
    end). A short chunk's padding rows and columns are identity in M and X."""
    k, beta, g, cu = inputs
    T, H = k.shape[1], k.shape[2]
    rows = chunk_tokens(cu)
    valid = rows >= 0                                                    # [C, n]
    idx = torch.where(valid, rows, 0)
    kc = torch.where(valid[:, :, None, None], k[0].double()[idx], 0.0).transpose(1, 2)     # [C, H, n, D]
    bc = torch.where(valid[:, :, None], beta[0].double()[idx], 0.0).transpose(1, 2)        # [C, H, n]
    gc = torch.where(valid[:, :, None], g[0].double()[idx], 0.0).transpose(1, 2)
    n = CHUNK
    strictly = torch.ones(n, n, dtype=torch.bool, device=k.device).tril(-1)
    pair = valid[:, None, :, None] & valid[:, None, None, :]
    decay = torch.exp(torch.where(strictly, gc[..., :, None] - gc[..., None, :], 0.0))
    eye = torch.eye(n, dtype=torch.float64, device=k.device)
    C = rows.shape[0]

    def matrix(scaled_keys):
        A = torch.where(strictly & pair, (scaled_keys @ kc.transpose(-1, -2)) * decay, 0.0)
        return (eye + A).reshape(C * H, n, n)

    # beta applied in fp32 or better, or beta * k rounded to bf16 (exact products of two bf16 values,
    # then one rounding) as flash-linear-attention computes it.
    exact = kc * bc[..., None]
    rounded = exact.to(torch.bfloat16).double()
    X = out[0].double()[idx].transpose(1, 2)                            # [C, H, n, n]
    X = torch.where(valid[:, None, :, None], X, eye)
    zero = strictly.T | ~valid[:, None, None, :]
    zero = zero & valid[:, None, :, None]
    return (matrix(exact), matrix(rounded)), X.reshape(C * H, n, n), zero.expand(C, H, n, n).reshape(C * H, n, n)


# fp32 in any stable order measured 1.3e-7 of the scale (CPU eager, 2048 tokens, 4 heads, 5 sequences);
# the same inverses rounded to tf32 gave 1.2e-4, to bf16 9.5e-4.
REL_TOL = 2.0 ** -16

HELDOUT_SHAPES = ("any T >= 1, H >= 1 and 1 <= S <= T sequences; submit also checks held-out shapes drawn at random "
                  "(three on each backend), each long on one axis and narrow on the others: more tokens, more heads, "
                  "and more sequences (many of them shorter than a chunk) than any workload of the backend")


def heldout_workloads(rng, smoke):
    """Shapes of the family, each past every workload of its backend on one axis (the spec checks it):
    a long single sequence (a capped grid of chunks fails it), many heads over few tokens, and many
    short sequences (partial chunks everywhere)."""
    if smoke:
        shapes = [(rng.randint(201, 260), 1, 1), (rng.randint(20, 70), rng.randint(3, 4), 1),
                  (rng.randint(60, 120), 1, rng.randint(5, 12))]
    else:
        shapes = [(rng.randint(32769, 40000), 1, 1), (rng.randint(64, 2048), rng.randint(33, 48), 1),
                  (rng.randint(2048, 8192), 2, rng.randint(13, 200))]
    return [Workload(f"{t}x{h}" + (f"-s{s}" if s > 1 else ""), {"T": t, "H": h, "S": s}) for t, h, s in shapes]


TASK = TaskSpec(
    title="WY triangular inverse (I + A)^-1 per chunk",
    family="linear attention",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("Ai", torch.float32)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "zeros"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=InverseResidual(inverse_blocks, "Ai", REL_TOL, what="each (chunk, head) matrix I + A"),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    # A in fp32 is exactly the output's size; the reference allocates only the output, in one launch
    # with no zero-filling pass, and moves the roofline's bytes (each program reads its chunk's keys,
    # betas and gates once and writes its inverse rows once).
    design_properties=[
        DesignProperty("a_never_in_memory", "L1",
                       "A is never written to global memory: each block of A is computed from the chunk's keys, "
                       "betas and gates in the program that uses it",
                       NoLargeIntermediate(0.5)),
        DesignProperty("block_forward_substitution", "L1",
                       "The chunk is split into diagonal blocks; only their small inverses use row substitution, "
                       "the blocks below the diagonal come from block forward substitution as matrix products"),
        DesignProperty("one_program_per_chunk_head", "L2",
                       "One launch: a program per (chunk, head) forms A's blocks, inverts and stores every inverse "
                       "row, zeros above the diagonal included, with no separate zero-fill pass",
                       MaxLaunches(1)),
        DesignProperty("inputs_read_once", "L2",
                       "DRAM traffic is one read of the keys, betas and gates and one write of the fp32 inverse "
                       "rows: key tiles are loaded once and reused from registers for every block of A",
                       BytesNearRoofline(1.5)),
        DesignProperty("ieee_fp32_block_products", "L3",
                       "Key products are tl.dot on bf16 operands; every product of fp32 blocks asks for full fp32 "
                       "(input_precision='ieee'), not the tf32 default",
                       UsesDot()),
        DesignProperty("masked_exponent_wide_offsets", "L3",
                       "The gate difference is masked to the strictly lower part before the exponential (no "
                       "overflow times zero NaN); token offsets times heads times head dim are 64-bit"),
    ],
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: a unit triangular matrix is always invertible"),
        "fixed_width_block": WrongSolution(skip="the output's last dimension is the chunk size, 64, on every shape"),
    },
)
