"""Task: moe_grouped_topk_router
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 517220931
Round: honest corpus

Idiom: a port in the style of SGLang's fused grouped-top-k gate: one token per program, a 1D row reshaped into groups, tl.argmax rounds."""

# Origin: written from the design of SGLang's biased grouped top-k gate (sgl-kernel moe_fused_gate
# and python/sglang/srt/layers/moe/topk.py): one token per program, sigmoid + bias correction,
# top-2 group scores, top groups, top experts, renormalised unbiased weights times the scaling factor.

import torch
import triton
import triton.language as tl

NUM_EXPERT_GROUP = 8
TOPK_GROUP = 4
TOPK = 8
ROUTED_SCALING_FACTOR = 2.5


@triton.jit
def moe_fused_gate_kernel(input_ptr, bias_ptr, output_ptr, indices_ptr, stride_row, routed_scaling_factor,
                          NUM_EXPERTS: tl.constexpr, NUM_GROUPS: tl.constexpr, TOPK_GROUP: tl.constexpr,
                          TOPK: tl.constexpr):
    row = tl.program_id(0)
    EXPERTS_PER_GROUP: tl.constexpr = NUM_EXPERTS // NUM_GROUPS
    offs = tl.arange(0, NUM_EXPERTS)
    x = tl.load(input_ptr + row.to(tl.int64) * stride_row + offs)
    sig = 1.0 / (1.0 + tl.exp(-x))
    biased = sig + tl.load(bias_ptr + offs)

    grouped = tl.reshape(biased, (NUM_GROUPS, EXPERTS_PER_GROUP))
    col = tl.arange(0, EXPERTS_PER_GROUP)
    top1_idx = tl.argmax(grouped, axis=1, tie_break_left=True)
    top1 = tl.max(grouped, axis=1)
    rest = tl.where(col[None, :] == top1_idx[:, None], float("-inf"), grouped)
    group_scores = top1 + tl.max(rest, axis=1)

    gid = tl.arange(0, NUM_GROUPS)
    group_keep = tl.zeros((NUM_GROUPS,), dtype=tl.int32)
    for _ in tl.static_range(TOPK_GROUP):
        g = tl.argmax(group_scores, axis=0, tie_break_left=True)
        group_keep = tl.where(gid == g, 1, group_keep)
        group_scores = tl.where(gid == g, float("-inf"), group_scores)

    keep = tl.reshape(tl.broadcast_to(group_keep[:, None], (NUM_GROUPS, EXPERTS_PER_GROUP)), (NUM_EXPERTS,))
    masked = tl.where(keep != 0, biased, float("-inf"))
    kk = tl.arange(0, TOPK)
    weights = tl.zeros((TOPK,), dtype=tl.float32)
    indices = tl.zeros((TOPK,), dtype=tl.int32)
    for k in tl.static_range(TOPK):
        e = tl.argmax(masked, axis=0, tie_break_left=True)
        w = tl.sum(tl.where(offs == e, sig, 0.0), axis=0)
        weights = tl.where(kk == k, w, weights)
        indices = tl.where(kk == k, e.to(tl.int32), indices)
        masked = tl.where(offs == e, float("-inf"), masked)
    weights = weights / tl.sum(weights, axis=0) * routed_scaling_factor
    tl.store(output_ptr + row * TOPK + kk, weights)
    tl.store(indices_ptr + row * TOPK + kk, indices)

def forward(gating_output, e_score_correction_bias):
    num_tokens, num_experts = gating_output.shape
    topk_weights = torch.empty((num_tokens, TOPK), dtype=torch.float32, device=gating_output.device)
    topk_ids = torch.empty((num_tokens, TOPK), dtype=torch.int32, device=gating_output.device)
    moe_fused_gate_kernel[(num_tokens,)](
        gating_output, e_score_correction_bias, topk_weights, topk_ids, gating_output.stride(0),
        ROUTED_SCALING_FACTOR, NUM_EXPERTS=num_experts, NUM_GROUPS=NUM_EXPERT_GROUP, TOPK_GROUP=TOPK_GROUP,
        TOPK=TOPK)
    return topk_weights, topk_ids
