"""Task: gqa_paged_decode
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Round: honest corpus

Idiom: SGLang's grouped decode (decode_attention.py, stage 1 and stage 2), per-request split counts computed on the device, natural-log softmax, no empty-split sentinel."""

# Origin: written for this task from the structure of SGLang's Triton decode backend
# (python/sglang/srt/layers/attention/triton_ops/decode_attention.py): a kernel that picks each
# request's number of KV splits from its length, a grouped stage-1 kernel over (batch, head block,
# split) storing normalised partial outputs and their log-sum-exps, and a stage-2 kernel that walks
# the splits with its own running maximum. Adapted only to this task's signature (no output or
# scratch arguments, scale 1/sqrt(d), no logit cap).

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
    splits = tl.minimum(tl.maximum(tl.cdiv(seq_len, MIN_TOKENS), 1), MAX_SPLITS)
    tl.store(num_kv_splits + offs, splits, mask=mask)


@triton.jit
def _fwd_grouped_kernel_stage1(Q, K_Buffer, V_Buffer, sm_scale, kv_indptr, kv_indices, Att_Out, Att_Lse,
                               num_kv_splits, stride_qbs, stride_qh, stride_buf_kbs, stride_buf_kh,
                               stride_buf_vbs, stride_buf_vh, stride_mid_ob, stride_mid_oh, stride_mid_os,
                               kv_group_num: tl.constexpr, q_head_num: tl.constexpr, BLOCK_DMODEL: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, MIN_BLOCK_KV: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head_id = tl.program_id(1)
    cur_kv_head = cur_head_id // tl.cdiv(kv_group_num, BLOCK_H)
    split_kv_id = tl.program_id(2)

    if kv_group_num > BLOCK_H:
        VALID_BLOCK_H: tl.constexpr = BLOCK_H
    else:
        VALID_BLOCK_H: tl.constexpr = kv_group_num
    cur_head = cur_head_id * VALID_BLOCK_H + tl.arange(0, BLOCK_H)
    mask_h = cur_head < (cur_head_id + 1) * VALID_BLOCK_H
    mask_h = mask_h & (cur_head < q_head_num)

    offs_d = tl.arange(0, BLOCK_DMODEL)
    cur_batch_kv_start_idx = tl.load(kv_indptr + cur_batch)
    cur_batch_seq_len = tl.load(kv_indptr + cur_batch + 1) - cur_batch_kv_start_idx
    kv_splits = tl.load(num_kv_splits + cur_batch)

    offs_q = cur_batch * stride_qbs + cur_head[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(Q + offs_q, mask=mask_h[:, None], other=0.0)

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
            offs_buf_k = kv_loc[None, :].to(tl.int64) * stride_buf_kbs + cur_kv_head * stride_buf_kh + offs_d[:, None]
            k = tl.load(K_Buffer + offs_buf_k, mask=offs_n[None, :] < split_kv_end, other=0.0)
            qk = tl.dot(q, k.to(q.dtype))
            qk *= sm_scale
            qk = tl.where(mask_h[:, None] & (offs_n[None, :] < split_kv_end), qk, float("-inf"))

            offs_buf_v = kv_loc[:, None].to(tl.int64) * stride_buf_vbs + cur_kv_head * stride_buf_vh + offs_d[None, :]
            v = tl.load(V_Buffer + offs_buf_v, mask=offs_n[:, None] < split_kv_end, other=0.0)

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


def forward(q, k_buffer, v_buffer, kv_indptr, kv_indices):
    batch, head_num, Lk = q.shape
    kv_group_num = head_num // k_buffer.shape[1]
    BLOCK_H = 16
    BLOCK_N = 32
    attn_logits = torch.empty((batch, head_num, MAX_KV_SPLITS, Lk), dtype=torch.float32, device=q.device)
    attn_lse = torch.empty((batch, head_num, MAX_KV_SPLITS), dtype=torch.float32, device=q.device)
    num_kv_splits = torch.empty((batch,), dtype=torch.int32, device=q.device)
    _get_num_kv_splits[(triton.cdiv(batch, 128),)](kv_indptr, num_kv_splits, batch, MAX_SPLITS=MAX_KV_SPLITS,
                                                    MIN_TOKENS=4 * MIN_BLOCK_KV, BLOCK_B=128)
    grid = (batch, triton.cdiv(head_num, min(BLOCK_H, kv_group_num)), MAX_KV_SPLITS)
    _fwd_grouped_kernel_stage1[grid](
        q, k_buffer, v_buffer, Lk ** -0.5, kv_indptr, kv_indices, attn_logits, attn_lse, num_kv_splits,
        q.stride(0), q.stride(1), k_buffer.stride(0), k_buffer.stride(1), v_buffer.stride(0), v_buffer.stride(1),
        attn_logits.stride(0), attn_logits.stride(1), attn_logits.stride(2),
        kv_group_num=kv_group_num, q_head_num=head_num, BLOCK_DMODEL=Lk, BLOCK_N=BLOCK_N, BLOCK_H=BLOCK_H,
        MIN_BLOCK_KV=MIN_BLOCK_KV, num_warps=4, num_stages=2)
    o = torch.empty_like(q)
    _fwd_kernel_stage2[(batch, head_num)](
        attn_logits, attn_lse, o, kv_indptr, num_kv_splits, attn_logits.stride(0), attn_logits.stride(1),
        attn_logits.stride(2), o.stride(0), o.stride(1), MAX_KV_SPLITS=MAX_KV_SPLITS, MIN_BLOCK_KV=MIN_BLOCK_KV,
        BLOCK_DV=Lk, num_warps=4)
    return o
