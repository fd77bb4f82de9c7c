"""Wrong: decays the state after the delta update instead of before it (the prediction then reads an
undecayed state, and the new token's write is decayed too)."""

import torch
import triton
import triton.language as tl

EPS = 1e-6           # inside the L2 norm of q and k, as the source system's l2norm (zero rows stay 0)
# [K, BLOCK_V] fp32 slice in registers: 128 x 32 = 4096 values over 4 warps is 32 per thread, and a
# row of the slice is one 128-byte line, so every state load and store is whole lines. B = 64 with
# 32 value heads then gives 8192 programs, about 60 per SM of an H100: enough to keep HBM busy.
BLOCK_V = 32
NUM_WARPS = 4


@triton.jit
def _gdn_recurrent_step_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, state_ptr, idx_ptr, o_ptr,
    T, H, HV, K, V, scale, eps,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):
    pid_v = tl.program_id(0)       # value blocks of one (request, head) run side by side: q, k hit L2
    pid_bh = tl.program_id(1)
    b = (pid_bh // HV).to(tl.int64)
    hv = pid_bh % HV
    h = hv // (HV // H)            # grouped value attention: HV / H value heads share a q/k head
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < K
    mask_v = offs_v < V
    mask_s = mask_k[:, None] & mask_v[None, :]

    # int64: slot * HV * K * V passes 2^31 with a pool of a few thousand slots.
    slot = tl.load(idx_ptr + b).to(tl.int64)
    s_ptrs = state_ptr + (slot * HV + hv) * K * V + offs_k[:, None] * V + offs_v[None, :]
    S = tl.load(s_ptrs, mask=mask_s, other=0.0)

    for t in range(T):
        row = b * T + t
        q = tl.load(q_ptr + (row * H + h) * K + offs_k, mask=mask_k, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + (row * H + h) * K + offs_k, mask=mask_k, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + (row * HV + hv) * V + offs_v, mask=mask_v, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + row * HV + hv)
        beta = tl.load(beta_ptr + row * HV + hv).to(tl.float32)
        # Normalise in registers: no normalised copy of q or k ever reaches HBM.
        q = q * (tl.rsqrt(tl.sum(q * q) + eps) * scale)
        k = k * tl.rsqrt(tl.sum(k * k) + eps)
        delta = (v - tl.sum(S * k[:, None], axis=0)) * beta
        S = (S + k[:, None] * delta[None, :]) * tl.exp(g)
        o = tl.sum(S * q[:, None], axis=0)
        tl.store(o_ptr + (row * HV + hv) * V + offs_v, o.to(o_ptr.dtype.element_ty), mask=mask_v)

    tl.store(s_ptrs, S, mask=mask_s)


def forward(q, k, v, g, beta, state, state_indices):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    assert HV % H == 0 and state.shape[1:] == (HV, K, V) and state.dtype == torch.float32
    assert all(x.is_contiguous() for x in (q, k, v, g, beta, state, state_indices))
    o = torch.empty((B, T, HV, V), dtype=v.dtype, device=v.device)
    grid = (triton.cdiv(V, BLOCK_V), B * HV)
    _gdn_recurrent_step_kernel[grid](
        q, k, v, g, beta, state, state_indices, o,
        T, H, HV, K, V, K ** -0.5, EPS,
        BLOCK_K=triton.next_power_of_2(K), BLOCK_V=BLOCK_V, num_warps=NUM_WARPS,
    )
    return o
