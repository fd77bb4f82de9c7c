"""Unified paged attention for mixed prefill and decode batches (vLLM's unified attention)."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, PerOutput, Roofline,
                           TaskSpec, UsesDot, Workload, WrongSolution)
from d2k_env.tasks.normwise import NormwiseError

SOURCES = [
    "vLLM vllm/attention/ops/triton_unified_attention.py (kernel_unified_attention_2d)",
    "vLLM vllm/v1/attention/backends/triton_attn.py (how the batch and the block table reach it)",
]
DESCRIPTION = """
One attention call for a whole scheduler step: N sequences, each with q_len_i new query tokens (a
prefill chunk, a fresh prompt, or 1 for a decode) on top of ctx_i tokens already cached, in any order.
    q [T, Hq, d] bf16 (the new tokens of every sequence, packed; sequence i is rows
      cu_seqlens_q[i] .. cu_seqlens_q[i+1]-1), cu_seqlens_q [N+1] int32, seq_lens [N] int32 (ctx_i + q_len_i),
    k_cache, v_cache [num_pages, 16, Hkv, d] bf16 (paged KV cache; the new tokens' keys and values are
      already in it), block_table [N, max_pages] int32 (sequence i's key position p lives in page
      block_table[i, p // 16], slot p % 16; pages in any physical order; entries past the sequence's
      last page are stale and must not be read).
Query head h uses KV head h // (Hq / Hkv). Query token t of sequence i (position ctx_i + t) attends to
key positions 0 .. ctx_i + t:
    o[t, h] = softmax(q[t, h] . K[0 .. ctx_i + t]^T * d^-0.5) V[0 .. ctx_i + t]     (softmax in fp32)
Return o [T, Hq, d] bf16.
"""

PAGE = 16
# Llama-3-8B: 32 query heads on 8 KV heads; Qwen3-32B and Llama-3-70B: 64 on 8; head dim 128.
WORKLOADS = [
    Workload("mixed_4x2K_on_2K_64dec_4K", {"Hq": 32, "Hkv": 8, "d": 128, "n_prefill": 4, "q_len": 2048,
                                                   "ctx": 2048, "n_decode": 64, "decode_ctx": 4096}),
    Workload("qwen32b_8x1K_on_8K", {"Hq": 64, "Hkv": 8, "d": 128, "n_prefill": 8, "q_len": 1024, "ctx": 8192,
                                    "n_decode": 0, "decode_ctx": 0}),
    Workload("llama70b_fresh_8K", {"Hq": 64, "Hkv": 8, "d": 128, "n_prefill": 1, "q_len": 8192, "ctx": 0,
                                   "n_decode": 0, "decode_ctx": 0}),
]
SMOKE_WORKLOADS = [
    Workload("mixed_2x20_on_13_3dec_30", {"Hq": 4, "Hkv": 2, "d": 32, "n_prefill": 2, "q_len": 20, "ctx": 13,
                                          "n_decode": 3, "decode_ctx": 30}),
    Workload("fresh_21_gqa6", {"Hq": 6, "Hkv": 1, "d": 16, "n_prefill": 1, "q_len": 21, "ctx": 0, "n_decode": 0,
                               "decode_ctx": 0}),
]


def make_inputs(w, gen, device):
    Hq, Hkv, d = w["Hq"], w["Hkv"], w["d"]
    # Prefill chunks at the workload's sizes; decodes at uneven contexts (3/4 of decode_ctx up to it,
    # never a multiple of the page by design); the scheduler's order of sequences, shuffled.
    n_dec = w["n_decode"]
    dec_ctx = w["decode_ctx"] - torch.randint(0, max(1, w["decode_ctx"] // 4), (n_dec,), generator=gen, device=device)
    q_lens = torch.cat([torch.full((w["n_prefill"],), w["q_len"], device=device),
                        torch.ones(n_dec, dtype=torch.int64, device=device)])
    ctxs = torch.cat([torch.full((w["n_prefill"],), w["ctx"], device=device), dec_ctx])
    order = torch.randperm(len(q_lens), generator=gen, device=device)
    q_lens, ctxs = q_lens[order], ctxs[order]
    N, T = len(q_lens), w["n_prefill"] * w["q_len"] + n_dec
    seq_lens = (q_lens + ctxs).to(torch.int32)
    cu_seqlens_q = torch.zeros(N + 1, dtype=torch.int32, device=device)
    cu_seqlens_q[1:] = q_lens.cumsum(0)
    # Pages: each sequence's, scattered at random over a pool a quarter larger than needed (free
    # pages between them); stale ids past each sequence's last page.
    max_ctx = max(w["q_len"] + w["ctx"] if w["n_prefill"] else 0, w["decode_ctx"] + 1)
    max_pages = (max_ctx + PAGE - 1) // PAGE
    used = N * max_pages  # an upper bound on the pages the batch holds: no value is read to size it
    num_pages = used + used // 4 + 1
    block_table = torch.randperm(num_pages, generator=gen, device=device)[:used].reshape(N, max_pages).to(torch.int32)
    k_cache = torch.randn(num_pages, PAGE, Hkv, d, generator=gen, device=device).to(torch.bfloat16)
    v_cache = torch.randn(num_pages, PAGE, Hkv, d, generator=gen, device=device).to(torch.bfloat16)
    # Query norms from flat to peaky attention: scores' spread 0.5 to 4 per (token, head).
    q = torch.randn(T, Hq, d, generator=gen, device=device) * \
        torch.exp(torch.empty(T, Hq, 1, device=device).uniform_(-0.7, 1.4, generator=gen))
    return q.to(torch.bfloat16), k_cache, v_cache, block_table, cu_seqlens_q, seq_lens


def roofline(w):
    Hq, Hkv, d = w["Hq"], w["Hkv"], w["d"]
    seqs = [(w["q_len"], w["ctx"])] * w["n_prefill"] + [(1, w["decode_ctx"])] * w["n_decode"]
    # Each sequence's K and V read once (bf16), q read and o written once.
    kv = sum(q_len + ctx for q_len, ctx in seqs) * Hkv * d * 2 * 2
    tokens = sum(q_len for q_len, _ in seqs) * Hq * d * 2 * 2
    flops = sum(4 * Hq * d * q_len * (ctx + q_len / 2) for q_len, ctx in seqs)
    return Roofline(bytes=kv + tokens, flops=flops)


# The softmax is fp32; P and V enter the second product as bf16 operands with fp32 accumulation (as
# every tensor-core flash kernel does), and o is rounded once. Emulated on the CPU against an fp64
# softmax (d = 128, 1-512 queries on 0-4K context, peaky and flat rows): the honest worst row is
# 2.9e-3 of (its norm + 0.02 of the rows' RMS norm). Scores rounded to bf16 before the softmax give
# 1.8e-2 to 2.9e-2; a skipped rescale 1.5 or more; a dropped diagonal tile 0.1 or more.
O_CHECK = NormwiseError(8e-3, floor=0.02, why="an fp32 softmax with bf16 P and V operands, fp32 accumulation; "
                                              "a bf16 softmax, a skipped rescale or a dropped tile do not fit")

HELDOUT_SHAPES = ("any mix of prefill chunks (any q_len >= 1 on any context) and decodes in any order, H_q a "
                  "multiple of H_kv, any d, pages in any order with stale block-table entries; submit also checks "
                  "held-out shapes drawn at random (two on the interpreter, four on the GPU), each long on one axis "
                  "and narrow on the others: more sequences and longer contexts, more heads, a wider head dim")


def heldout_workloads(rng, smoke):
    """Past every workload of the backend on one axis each, narrow on the others. On the interpreter
    the second has a head dim past 128, the widest of any workload (a fixed-width block fails it),
    and more KV heads than any smoke workload (a capped grid fails it)."""
    if smoke:
        shapes = [(4, 2, 32, 3, rng.randint(22, 25), rng.randint(14, 20), rng.randint(4, 5), rng.randint(31, 40)),
                  (8, 4, rng.choice((144, 160)), 1, rng.randint(2, 5), rng.randint(3, 9), 1, rng.randint(3, 9))]
    else:
        shapes = [(32, 8, 128, 1, rng.randint(100, 300), rng.randint(0, 500), rng.randint(65, 96),
                   rng.randint(4097, 5000)),
                  (16, 2, 128, 1, rng.randint(8193, 9000), rng.randint(8193, 9000), 1, rng.randint(1, 100)),
                  (72, 9, 128, rng.randint(9, 12), rng.randint(17, 60), rng.randint(1, 99), 2, rng.randint(1, 60)),
                  (4, 2, rng.choice((192, 256)), 1, rng.randint(30, 200), rng.randint(0, 300), 1, rng.randint(1, 300))]
    keys = ("Hq", "Hkv", "d", "n_prefill", "q_len", "ctx", "n_decode", "decode_ctx")
    return [Workload(f"Hq{s[0]}_Hkv{s[1]}_d{s[2]}_{s[3]}x{s[4]}_on_{s[5]}_{s[6]}dec_{s[7]}", dict(zip(keys, s)))
            for s in shapes]


TASK = TaskSpec(
    title="Unified paged attention: mixed prefill and decode",
    family="attention",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("o", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "empty_like", "empty_strided"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=PerOutput({"o": O_CHECK}),
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    # The reference allocates only o; the scores of the step's longest sequence alone exceed half of
    # o on every workload (a gathered K copy need not: at 8 query heads per KV head it is 1/8 of o).
    design_properties=[
        DesignProperty("one_launch_mixed_step", "L1",
                       "One kernel launch serves the whole step: prefill chunks, fresh prompts and decodes (a "
                       "decode treated as a chunk of one token) in the same grid",
                       MaxLaunches(1)),
        DesignProperty("online_softmax_no_scores", "L1",
                       "Online softmax with fp32 running max, sum and output per row, divided once at the end; no "
                       "score or probability matrix is written to global memory",
                       NoLargeIntermediate(0.5)),
        DesignProperty("walk_stops_at_frontier", "L1",
                       "A query block's key walk ends at the causal frontier of its last token (ctx + its last "
                       "new-token index); a decode reads only its context"),
        DesignProperty("sequence_found_in_kernel", "L2",
                       "The grid is an upper bound from the shapes (e.g. T // BLOCK_Q + N blocks); a program finds "
                       "its sequence by binary search over cu_seqlens_q in the kernel; surplus programs exit"),
        DesignProperty("group_shares_kv_tile", "L2",
                       "A query tile is a block of tokens times all query heads of one KV head; each K/V tile is "
                       "gathered through the block table (no contiguous copy) and serves the whole group"),
        DesignProperty("tensor_core_tiles_and_guards", "L3",
                       "Q.K^T and P.V are tl.dot with fp32 accumulation and exp2 scores; fully masked rows are "
                       "guarded (max taken as 0, sum 1) so no NaN; page ids widened to 64 bits",
                       UsesDot()),
    ],
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon: every query sees at least its own key, so each softmax "
                                          "denominator is at least 1"),
        "output_scaled": WrongSolution(skip="the only output is bf16 (a 1e-3 scale is a quarter of a step)"),
    },
)
