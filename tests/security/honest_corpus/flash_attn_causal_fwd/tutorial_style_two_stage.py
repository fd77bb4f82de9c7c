"""Task: flash_attn_causal_fwd
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Round: honest corpus

Idiom: the Triton tutorial's fused attention (06-fused-attention.py): an inner function called once per stage (off-band, then on-band with the causal mask), an additive large-negative mask, max taken before scaling, the accumulator passed to tl.dot, autotuned block sizes."""

# Origin: written for this task from the structure of the forward pass of Triton's tutorial
# python/tutorials/06-fused-attention.py (_attn_fwd and _attn_fwd_inner, causal STAGE 3): the same
# two-stage split of the key range, the same order of operations in the online softmax, and the
# log-sum-exp kept in base 2 until the end. Adapted only to this task's signature: plain pointers
# with masks instead of tensor descriptors (lengths need not be a multiple of a block), the
# log-sum-exp converted to a natural log on store, the output dtype read as .dtype (the policy refuses
# .type in a kernel), and no backward.

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, stride_kn, stride_vn, start_m, qk_scale, N_CTX,
                    BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                    offs_m: tl.constexpr, offs_n: tl.constexpr):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    else:
        lo, hi = start_m * BLOCK_M, tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K_block_ptr + cols[None, :] * stride_kn + offs_d[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        if STAGE == 2:
            mask = (offs_m[:, None] >= cols[None, :]) & (cols[None, :] < N_CTX)
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        acc = acc * alpha[:, None]
        v = tl.load(V_block_ptr + cols[:, None] * stride_vn + offs_d[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_ij
        l_i = l_i * alpha + l_ij
    return acc, l_i, m_i


@triton.autotune(configs=[triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=8),
                          triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=2, num_warps=4)],
                 key=["N_CTX", "HEAD_DIM"])
@triton.jit
def _attn_fwd(Q, K, V, sm_scale, M, Out, stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
              stride_vz, stride_vh, stride_vk, stride_oz, stride_oh, stride_om, Z, H, N_CTX,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_offset = off_z * stride_qz + off_h * stride_qh
    k_offset = off_z * stride_kz + off_h * stride_kh
    v_offset = off_z * stride_vz + off_h * stride_vh
    o_offset = off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale
    qk_scale *= 1.44269504
    q = tl.load(Q + q_offset + offs_m[:, None] * stride_qm + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + k_offset, V + v_offset, stride_kn, stride_vk, start_m,
                                    qk_scale, N_CTX, BLOCK_M, HEAD_DIM, BLOCK_N, 1, offs_m, offs_n)
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K + k_offset, V + v_offset, stride_kn, stride_vk, start_m,
                                    qk_scale, N_CTX, BLOCK_M, HEAD_DIM, BLOCK_N, 2, offs_m, offs_n)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    m_ptrs = M + off_hz.to(tl.int64) * N_CTX + offs_m
    tl.store(m_ptrs, m_i * 0.6931471805599453, mask=offs_m < N_CTX)
    tl.store(Out + o_offset + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N_CTX)


def forward(q, k, v):
    HEAD_DIM_Q, HEAD_DIM_K, HEAD_DIM_V = q.shape[-1], k.shape[-1], v.shape[-1]
    assert HEAD_DIM_Q == HEAD_DIM_K and HEAD_DIM_K == HEAD_DIM_V
    o = torch.empty_like(q)
    sm_scale = HEAD_DIM_K ** -0.5
    M = torch.empty((q.shape[0], q.shape[1], q.shape[2]), device=q.device, dtype=torch.float32)

    def grid(args):
        return (triton.cdiv(q.shape[2], args["BLOCK_M"]), q.shape[0] * q.shape[1], 1)

    _attn_fwd[grid](q, k, v, sm_scale, M, o, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                    k.stride(2), v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                    q.shape[0], q.shape[1], N_CTX=q.shape[2], HEAD_DIM=HEAD_DIM_K)
    return o, M
