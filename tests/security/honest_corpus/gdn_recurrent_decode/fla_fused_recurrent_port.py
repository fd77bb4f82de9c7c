"""Task: gdn_recurrent_decode
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1874402211
Round: honest corpus

Idiom: a port of flash-linear-attention's fused recurrent gated delta rule (vLLM's copy): heuristics-chosen constexpr flags, pointers advanced per token, a narrow value block and one warp."""

# Origin: the structure of fused_recurrent_gated_delta_rule_fwd_kernel in flash-linear-attention
# (fla/ops/gated_delta_rule/fused_recurrent.py, vendored by vLLM in
# vllm/model_executor/layers/fla/ops/fused_recurrent.py), written anew for this task's signature:
# state-pool indices, in-kernel q/k L2 norm, in-place final state, no varlen offsets.

import torch
import triton
import triton.language as tl


@triton.heuristics({
    "USE_QK_L2NORM_IN_KERNEL": lambda args: args["use_qk_l2norm"],
    "IS_BETA_HEADWISE": lambda args: args["beta_is_headwise"],
})
@triton.jit(do_not_specialize=["T"])
def fused_recurrent_gated_delta_rule_fwd_kernel(
    q, k, v, g, beta, o, h0, ssm_state_indices,
    scale, T,
    use_qk_l2norm, beta_is_headwise,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr,
    USE_QK_L2NORM_IN_KERNEL: tl.constexpr, IS_BETA_HEADWISE: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_hv = i_nh // HV, i_nh % HV
    i_h = i_hv // (HV // H)
    bos = i_n.to(tl.int64) * T

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    p_q = q + (bos * H + i_h) * K + o_k
    p_k = k + (bos * H + i_h) * K + o_k
    p_v = v + (bos * HV + i_hv) * V + o_v
    p_beta = beta + bos * HV + i_hv
    p_g = g + bos * HV + i_hv
    p_o = o + (bos * HV + i_hv) * V + o_v

    mask_k = o_k < K
    mask_v = o_v < V
    mask_h = mask_k[:, None] & mask_v[None, :]

    idx = tl.load(ssm_state_indices + i_n).to(tl.int64)
    p_h0 = h0 + idx * HV * K * V + i_hv * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h0, mask=mask_h, other=0).to(tl.float32)

    for _ in range(0, T):
        b_q = tl.load(p_q, mask=mask_k, other=0).to(tl.float32)
        b_k = tl.load(p_k, mask=mask_k, other=0).to(tl.float32)
        b_v = tl.load(p_v, mask=mask_v, other=0).to(tl.float32)
        b_g = tl.load(p_g).to(tl.float32)
        if USE_QK_L2NORM_IN_KERNEL:
            b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6)
            b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
        b_q = b_q * scale
        b_h *= tl.exp(b_g)
        b_v -= tl.sum(b_h * b_k[:, None], 0)
        if IS_BETA_HEADWISE:
            b_beta = tl.load(p_beta).to(tl.float32)
        else:
            b_beta = tl.load(p_beta + o_v, mask=mask_v, other=0).to(tl.float32)
        b_v *= b_beta
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], 0)
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=mask_v)

        p_q += H * K
        p_k += H * K
        p_o += HV * V
        p_v += HV * V
        p_g += HV
        p_beta += HV

    tl.store(p_h0, b_h.to(p_h0.dtype.element_ty), mask=mask_h)


def fused_recurrent_gated_delta_rule_fwd(q, k, v, g, beta, scale, initial_state, ssm_state_indices,
                                         use_qk_l2norm_in_kernel=True):
    B, T, H, K, V = *k.shape, v.shape[-1]
    HV = v.shape[2]
    BK, BV = triton.next_power_of_2(K), min(triton.next_power_of_2(V), 8)
    NV = triton.cdiv(V, BV)
    o = q.new_empty(B, T, HV, V, dtype=v.dtype)
    grid = (NV, B * HV)
    fused_recurrent_gated_delta_rule_fwd_kernel[grid](
        q=q, k=k, v=v, g=g, beta=beta, o=o, h0=initial_state, ssm_state_indices=ssm_state_indices,
        scale=scale, T=T, use_qk_l2norm=use_qk_l2norm_in_kernel, beta_is_headwise=beta.ndim == v.ndim - 1,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV, num_warps=1, num_stages=3,
    )
    return o


def forward(q, k, v, g, beta, state, state_indices):
    return fused_recurrent_gated_delta_rule_fwd(q, k, v, g, beta, q.shape[-1] ** -0.5, state, state_indices)
