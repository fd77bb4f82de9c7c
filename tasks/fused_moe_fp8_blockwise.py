"""First grouped GEMM of a block-fp8 (w8a8, DeepSeek recipe) MoE: fp8 activations and weights with
1x128 and 128x128 block scales, one bf16 row per (token, expert) slot."""

import torch

from d2k_env.tasks import (DesignProperty, Heldout, MaxLaunches, NoLargeIntermediate, Output, PerOutput, Roofline,
                           TaskSpec, UsesDot, Workload, WrongSolution)
from d2k_env.tasks.accumulated_error import AccumulatedError

SOURCES = [
    "vLLM vllm/model_executor/layers/fused_moe/fused_moe.py (fused_moe_kernel with block_shape [128, 128])",
    "SGLang python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py",
]
BLOCK = 128
FP8_MAX = 448.0
DESCRIPTION = f"""
Inputs: a_q [T, K] float8_e4m3fn with a_scale [T, K/{BLOCK}] fp32 (one scale per token per {BLOCK} columns),
w_q [E, N, K] float8_e4m3fn with w_scale [E, N/{BLOCK}, K/{BLOCK}] fp32 (one scale per {BLOCK}x{BLOCK} block),
topk_ids [T, k] int32 (each token's k distinct experts; some experts get no token). N and K are multiples of
{BLOCK}. For every slot (t, j), e = topk_ids[t, j], in fp32:
    out[t, j, n] = sum over K blocks b of a_scale[t, b] * w_scale[e, n / {BLOCK}, b]
                   * sum over c in block b of a_q[t, c] * w_q[e, n, c]
Return out [T, k, N] bf16, rounded once. Accumulate in fp32 (a tensor-core fp8 product per K block, promoted
to fp32 with its scales, is fine); dequantising the operands to bf16 is not.
"""

WORKLOADS = [
    Workload("T64_E256_k8_N512", {"T": 64, "E": 256, "k": 8, "N": 512, "K": 7168}),
    Workload("T4096_E256_k8_N512", {"T": 4096, "E": 256, "k": 8, "N": 512, "K": 7168}),
    Workload("T8192_E32_k8_N4096", {"T": 8192, "E": 32, "k": 8, "N": 4096, "K": 7168}),
]
SMOKE_WORKLOADS = [
    Workload("T5_E4_k2_N128_K256", {"T": 5, "E": 4, "k": 2, "N": 128, "K": 256}),
    Workload("T11_E6_k3_N256_K384", {"T": 11, "E": 6, "k": 3, "N": 256, "K": 384}),
]


def quantise(x, rows, cols):
    """fp8 codes and one scale per rows x cols block of the last two dims (amax / 448, as the recipe)."""
    R, C = x.shape[-2:]
    g = x.reshape(*x.shape[:-2], R // rows, rows, C // cols, cols)
    scale = g.abs().amax(dim=(-3, -1), keepdim=True).clamp(min=1e-10) / FP8_MAX
    q = (g / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(x.shape), scale.squeeze(-1).squeeze(-2)


def route(T, E, k, gen, device):
    """Distinct experts per token with skewed popularity; about one expert in eight never chosen."""
    rank = torch.randperm(E, generator=gen, device=device) if gen is not None else torch.arange(E, device=device)
    cold = rank >= E - max(1, min(E // 8, E - k))
    log_p = (-torch.log1p(rank.float())).masked_fill(cold, float("-inf"))
    u = torch.rand(T, E, generator=gen, device=device).clamp(min=1e-12)
    return (log_p - torch.log(-torch.log(u))).topk(k, dim=-1).indices.to(torch.int32).contiguous()


def make_inputs(w, gen, device):
    T, E, k, N, K = w["T"], w["E"], w["k"], w["N"], w["K"]
    # Activations: token magnitudes over orders of magnitude, a few outliers, and padding tokens
    # (all zero: their scales sit on the floor).
    x = torch.randn(T, K, generator=gen, device=device) * torch.exp(torch.randn(T, 1, generator=gen, device=device))
    x = torch.where(torch.rand(T, K, generator=gen, device=device) < 0.002, x * 20.0, x)
    if T > 1:
        pad = torch.rand(T, 1, generator=gen, device=device) < 1 / 16
        pad[torch.randint(T, (1,), generator=gen, device=device)] = True
        x = x.masked_fill(pad, 0.0)
    a_q, a_scale = quantise(x, 1, BLOCK)
    # Weights: block magnitudes spread over an order of magnitude each way, as trained experts' are.
    block_mag = torch.exp(torch.randn(E, N // BLOCK, 1, K // BLOCK, 1, generator=gen, device=device))
    wf = (torch.randn(E, N // BLOCK, BLOCK, K // BLOCK, BLOCK, generator=gen, device=device) * 0.02 * block_mag)
    w_q, w_scale = quantise(wf.reshape(E, N, K), BLOCK, BLOCK)
    return (a_q, a_scale.reshape(T, K // BLOCK).contiguous(), w_q, w_scale.contiguous(), route(T, E, k, gen, device))


def roofline(w):
    T, E, k, N, K = w["T"], w["E"], w["k"], w["N"], w["K"]
    used = min(E, T * k)
    # fp8 weights of every used expert once, activations once, scales, bf16 output per slot.
    return Roofline(bytes=used * N * K + T * K + 4 * (T * K + used * N * K // BLOCK) // BLOCK + 2 * T * k * N + 4 * T * k,
                    flops=2 * T * k * N * K)


# Measured on CPU (T=64, E=8, k=2, N=512, K=7168, against this baseline): fp32 accumulation of
# scaled per-block fp8 products changes 0.04% of the bf16 outputs, RMS error 2e-5 of the output's RMS;
# rounding each block's product to a 14-bit mantissa (a model of Hopper's fp8 tensor-core
# accumulation) 2% and 2.5e-4; dequantising both operands to bf16 first 51% and 3.2e-3; one
# per-tensor scale instead of the blocks' is off by 5.7 RMS.
CHECK = PerOutput({"out": AccumulatedError(
    rtol=2.0 ** -7, max_fraction=0.02, rms_fraction=0.001,
    why="fp32 accumulation of each K block's fp8 product with its scales lands within (2.5e-4 RMS with "
        "14-bit tensor-core accumulation); bf16-dequantised operands give 3.2e-3")})

HELDOUT_SHAPES = ("any T >= 1, E >= k, N and K multiples of 128; submit also checks held-out shapes drawn at random, each "
                  "past every workload of the backend on one axis (tokens, experts, k, N, K) and small on the others")


def heldout_workloads(rng, smoke):
    B = BLOCK
    if smoke:
        shapes = [(rng.randint(12, 30), 4, 2, B, B), (3, rng.randint(7, 12), 2, B, B), (4, 8, rng.randint(4, 5), B, B),
                  (1, 2, 1, B * rng.randint(33, 34), B), (2, 4, 2, B, B * rng.randint(4, 5))]
    else:
        shapes = [(rng.randint(8193, 9000), 16, 2, 512, 512), (64, rng.randint(257, 320), 8, 256, 512),
                  (64, 32, rng.randint(9, 12), 256, 512), (16, 8, 2, B * rng.randint(33, 40), 512),
                  (16, 8, 2, 256, B * rng.randint(57, 64))]
    return [Workload(f"T{t}_E{e}_k{k}_N{n}_K{kk}", {"T": t, "E": e, "k": k, "N": n, "K": kk})
            for t, e, k, n, kk in shapes]


TASK = TaskSpec(
    title="Fused MoE first GEMM, block fp8 (w8a8, 128x128 scales)",
    family="moe",
    sources=SOURCES,
    description=DESCRIPTION,
    outputs=[Output("out", torch.bfloat16)],
    workloads=WORKLOADS,
    smoke_workloads=SMOKE_WORKLOADS,
    allowed_torch=["empty", "zeros", "bfloat16", "float32", "int32"],
    make_inputs=make_inputs,
    roofline=roofline,
    check=CHECK,
    heldout=Heldout(HELDOUT_SHAPES, heldout_workloads),
    wrong_solutions={
        "eps_removed": WrongSolution(skip="no epsilon in the GEMM (the inputs' scales are given)"),
        "output_scaled": WrongSolution(skip="the only output is bf16: 1 + 1e-3 is a quarter of a step"),
    },
    design_properties=[
        DesignProperty("scales_on_block_products", "L1",
                       "Each 128-wide K block's raw fp8 dot is scaled by the outer product of its row (activation) "
                       "and column (weight) scales and added to an fp32 accumulator; the dot never accumulates across "
                       "blocks"),
        # 1x the output: one expert's dequantised weights exceed it on the smoke and decode workloads (11-26x), while
        # the slot list padded to any BLOCK_M up to 128 stays under it (the reference's largest: 0.11x, smoke).
        DesignProperty("never_dequantised", "L1",
                       "No dequantised copy of the weights (not even one expert's) exists in memory: no buffer besides "
                       "the output is larger than the output",
                       NoLargeIntermediate(1.0)),
        DesignProperty("gather_rows_by_slot", "L2",
                       "Activation rows and their scales are gathered by slot index inside the GEMM from the expert-"
                       "sorted slot list: no permuted copy of a_q or a_scale, no repeated-out scale tensor"),
        DesignProperty("k_step_is_scale_block", "L2",
                       "The K step is exactly the 128-wide quantisation block: one activation scale per tile row and "
                       "one weight scale per tile column are loaded per iteration"),
        # Three routing kernels and one GEMM: a loop over experts, or a separate dequantise pass, launches more.
        DesignProperty("one_grouped_gemm_launch", "L3",
                       "Three small routing launches and one grouped GEMM per call, sized from shapes with no host "
                       "synchronisation: no per-expert loop",
                       MaxLaunches(4)),
        DesignProperty("fp8_tensor_core_dot", "L3",
                       "tl.dot takes the fp8 e4m3 tiles as loaded (weights read K-major by addressing, no transposed "
                       "copy) and returns fp32 that is scaled outside the dot",
                       UsesDot()),
    ],
)
