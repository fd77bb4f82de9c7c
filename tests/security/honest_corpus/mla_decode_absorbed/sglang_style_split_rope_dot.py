"""Task: mla_decode_absorbed
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Round: honest corpus

Idiom: SGLang's grouped decode kernel on the MLA shapes (BLOCK_DMODEL 512 plus BLOCK_DPE 64: a separate rope dot), K loaded transposed, per-request split counts computed on the device, a stage-2 kernel that recomputes each split's bounds."""

# Origin: written for this task from the structure of SGLang's Triton decode backend
# (python/sglang/srt/layers/attention/triton_ops/decode_attention.py) as it runs DeepSeek's absorbed
# MLA: q and the cache row split into a 512-wide part and a 64-wide rope part (BLOCK_DMODEL,
# BLOCK_DPE), the value read as the first 512 columns of the key row, a grouped stage-1 kernel over
# (batch, head block, split) and a stage-2 merge. Adapted only to this task's signature: q comes as
# two tensors (nope, pe), the cache is one [S, 576] buffer, no output or scratch arguments, no logit cap.

import torch
import triton
import triton.language as tl

MAX_KV_SPLITS = 8
MIN_BLOCK_KV = 32


@triton.jit
def _get_num_kv_splits(kv_indptr, num_kv_splits, batch, MAX_SPLITS: tl.constexpr, MIN_TOKENS: tl.constexpr,
                       BLOCK_B: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    mask = offs < batch
    seq_len = tl.load(kv_indptr + offs + 1, mask=mask, other=0) - tl.load(kv_indptr + offs, mask=mask, other=0)
    tl.store(num_kv_splits + offs, tl.minimum(tl.maximum(tl.cdiv(seq_len, MIN_TOKENS), 1), MAX_SPLITS), mask=mask)


@triton.jit
def _fwd_grouped_kernel_stage1(Q_nope, Q_pe, K_Buffer, sm_scale, kv_indptr, kv_indices, Att_Out, Att_Lse,
                               num_kv_splits, stride_qnb, stride_qnh, stride_qpb, stride_qph, stride_buf_kbs,
                               stride_mid_ob, stride_mid_oh, stride_mid_os, q_head_num,
                               BLOCK_DMODEL: tl.constexpr, BLOCK_DPE: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_H: tl.constexpr, MIN_BLOCK_KV: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head_id = tl.program_id(1)
    split_kv_id = tl.program_id(2)
    cur_head = cur_head_id * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = cur_head < q_head_num

    offs_d = tl.arange(0, BLOCK_DMODEL)
    offs_dpe = tl.arange(0, BLOCK_DPE)
    cur_batch_kv_start_idx = tl.load(kv_indptr + cur_batch)
    cur_batch_seq_len = tl.load(kv_indptr + cur_batch + 1) - cur_batch_kv_start_idx
    kv_splits = tl.load(num_kv_splits + cur_batch)

    q = tl.load(Q_nope + cur_batch * stride_qnb + cur_head[:, None] * stride_qnh + offs_d[None, :],
                mask=mask_h[:, None], other=0.0)
    qpe = tl.load(Q_pe + cur_batch * stride_qpb + cur_head[:, None] * stride_qph + offs_dpe[None, :],
                  mask=mask_h[:, None], other=0.0)

    kv_len_per_split = tl.cdiv(tl.cdiv(cur_batch_seq_len, kv_splits), MIN_BLOCK_KV) * MIN_BLOCK_KV
    split_kv_start = kv_len_per_split * split_kv_id
    split_kv_end = tl.minimum(split_kv_start + kv_len_per_split, cur_batch_seq_len)

    e_max = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    e_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DMODEL], dtype=tl.float32)

    if split_kv_end > split_kv_start:
        for start_n in range(split_kv_start, split_kv_end, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            kv_loc = tl.load(kv_indices + cur_batch_kv_start_idx + offs_n, mask=offs_n < split_kv_end, other=0)
            offs_buf_k = kv_loc[None, :].to(tl.int64) * stride_buf_kbs + offs_d[:, None]
            k = tl.load(K_Buffer + offs_buf_k, mask=offs_n[None, :] < split_kv_end, other=0.0)
            qk = tl.dot(q, k.to(q.dtype))
            offs_buf_kpe = kv_loc[None, :].to(tl.int64) * stride_buf_kbs + BLOCK_DMODEL + offs_dpe[:, None]
            kpe = tl.load(K_Buffer + offs_buf_kpe, mask=offs_n[None, :] < split_kv_end, other=0.0)
            qk += tl.dot(qpe, kpe.to(qpe.dtype))
            qk *= sm_scale
            qk = tl.where(mask_h[:, None] & (offs_n[None, :] < split_kv_end), qk, float("-inf"))

            offs_buf_v = kv_loc[:, None].to(tl.int64) * stride_buf_kbs + offs_d[None, :]
            v = tl.load(K_Buffer + offs_buf_v, mask=offs_n[:, None] < split_kv_end, other=0.0)

            n_e_max = tl.maximum(tl.max(qk, 1), e_max)
            re_scale = tl.exp(e_max - n_e_max)
            p = tl.exp(qk - n_e_max[:, None])
            acc *= re_scale[:, None]
            acc += tl.dot(p.to(v.dtype), v)
            e_sum = e_sum * re_scale + tl.sum(p, 1)
            e_max = n_e_max

        offs_mid_o = cur_batch * stride_mid_ob + cur_head[:, None] * stride_mid_oh + split_kv_id * stride_mid_os \
            + offs_d[None, :]
        tl.store(Att_Out + offs_mid_o, acc / e_sum[:, None], mask=mask_h[:, None])
        offs_mid_lse = (cur_batch * stride_mid_ob + cur_head * stride_mid_oh + split_kv_id * stride_mid_os) \
            // BLOCK_DMODEL
        tl.store(Att_Lse + offs_mid_lse, e_max + tl.log(e_sum), mask=mask_h)


@triton.jit
def _fwd_kernel_stage2(Mid_O, Mid_O_1, O, kv_indptr, num_kv_splits, stride_mid_ob, stride_mid_oh, stride_mid_os,
                       stride_obs, stride_oh, MAX_KV_SPLITS: tl.constexpr, MIN_BLOCK_KV: tl.constexpr,
                       BLOCK_DV: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head = tl.program_id(1)
    cur_batch_seq_len = tl.load(kv_indptr + cur_batch + 1) - tl.load(kv_indptr + cur_batch)
    kv_splits = tl.load(num_kv_splits + cur_batch)
    offs_d = tl.arange(0, BLOCK_DV)
    e_sum = 0.0
    e_max = -float("inf")
    acc = tl.zeros([BLOCK_DV], dtype=tl.float32)
    offs_v = cur_batch * stride_mid_ob + cur_head * stride_mid_oh + offs_d
    offs_logic = (cur_batch * stride_mid_ob + cur_head * stride_mid_oh) // BLOCK_DV
    kv_len_per_split = tl.cdiv(tl.cdiv(cur_batch_seq_len, kv_splits), MIN_BLOCK_KV) * MIN_BLOCK_KV
    for split_kv_id in range(0, MAX_KV_SPLITS):
        split_kv_start = kv_len_per_split * split_kv_id
        split_kv_end = tl.minimum(split_kv_start + kv_len_per_split, cur_batch_seq_len)
        if split_kv_end > split_kv_start:
            tv = tl.load(Mid_O + offs_v + split_kv_id * stride_mid_os)
            tlogic = tl.load(Mid_O_1 + offs_logic + split_kv_id * stride_mid_os // BLOCK_DV)
            n_e_max = tl.maximum(tlogic, e_max)
            old_scale = tl.exp(e_max - n_e_max)
            acc *= old_scale
            exp_logic = tl.exp(tlogic - n_e_max)
            acc += exp_logic * tv
            e_sum = e_sum * old_scale + exp_logic
            e_max = n_e_max
    tl.store(O + cur_batch * stride_obs + cur_head * stride_oh + offs_d, (acc / e_sum).to(O.dtype.element_ty))


def forward(q_nope, q_pe, kv_buffer, kv_indptr, kv_indices):
    batch, head_num, Lv = q_nope.shape
    BLOCK_DPE = q_pe.shape[-1]
    BLOCK_H = 16
    BLOCK_N = 32
    sm_scale = 192 ** -0.5
    attn_logits = torch.empty((batch, head_num, MAX_KV_SPLITS, Lv), dtype=torch.float32, device=q_nope.device)
    attn_lse = torch.empty((batch, head_num, MAX_KV_SPLITS), dtype=torch.float32, device=q_nope.device)
    num_kv_splits = torch.empty((batch,), dtype=torch.int32, device=q_nope.device)
    _get_num_kv_splits[(triton.cdiv(batch, 128),)](kv_indptr, num_kv_splits, batch, MAX_SPLITS=MAX_KV_SPLITS,
                                                    MIN_TOKENS=4 * MIN_BLOCK_KV, BLOCK_B=128)
    grid = (batch, triton.cdiv(head_num, BLOCK_H), MAX_KV_SPLITS)
    _fwd_grouped_kernel_stage1[grid](
        q_nope, q_pe, kv_buffer, sm_scale, kv_indptr, kv_indices, attn_logits, attn_lse, num_kv_splits,
        q_nope.stride(0), q_nope.stride(1), q_pe.stride(0), q_pe.stride(1), kv_buffer.stride(0),
        attn_logits.stride(0), attn_logits.stride(1), attn_logits.stride(2), head_num,
        BLOCK_DMODEL=Lv, BLOCK_DPE=BLOCK_DPE, BLOCK_N=BLOCK_N, BLOCK_H=BLOCK_H, MIN_BLOCK_KV=MIN_BLOCK_KV,
        num_warps=4, num_stages=2)
    o = torch.empty_like(q_nope)
    _fwd_kernel_stage2[(batch, head_num)](
        attn_logits, attn_lse, o, kv_indptr, num_kv_splits, attn_logits.stride(0), attn_logits.stride(1),
        attn_logits.stride(2), o.stride(0), o.stride(1), MAX_KV_SPLITS=MAX_KV_SPLITS, MIN_BLOCK_KV=MIN_BLOCK_KV,
        BLOCK_DV=Lv, num_warps=4)
    return o
