"""Task: unified_paged_prefill
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 3021477160
Round: honest corpus

Idiom: a port of vLLM's unified attention 2D kernel: q-block mode sequence lookup by binary search, constexpr feature flags, transposed key tiles, running statistics initialised as vLLM does, a launcher that derives its block sizes in Python."""

# Origin: the structure of kernel_unified_attention_2d and unified_attention in vLLM
# (vllm/attention/ops/triton_unified_attention.py), written anew for this task's signature: no
# sliding window, softcap, alibi, sinks or fp8 scales (their flags are kept, off), and the grid sized
# from the tensor shapes instead of max_seqlen_q (a host value the task does not pass).

import torch
import triton
import triton.language as tl


@triton.jit
def cdiv_fn(x, y):
    return (x + y - 1) // y


@triton.jit
def find_seq_idx(query_start_len_ptr, target_idx, num_seqs, BLOCK_Q: tl.constexpr, use_q_block_mode: tl.constexpr):
    left: tl.int32 = 0
    right = num_seqs
    while left < right:
        mid = (left + right) // 2
        val = tl.load(query_start_len_ptr + mid)
        mid_val = val // BLOCK_Q + mid if use_q_block_mode else val
        if mid_val <= target_idx:
            left = mid + 1
        else:
            right = mid
    return left - 1


@triton.jit
def kernel_unified_attention_2d(
    output_ptr, query_ptr, key_cache_ptr, value_cache_ptr, block_tables_ptr, seq_lens_ptr, scale,
    num_query_heads: tl.constexpr, num_queries_per_kv: tl.constexpr, block_table_stride: tl.int64,
    query_stride_0: tl.int64, query_stride_1: tl.int64, output_stride_0: tl.int64, output_stride_1: tl.int64,
    BLOCK_SIZE: tl.constexpr, TILE_SIZE: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_SIZE_PADDED: tl.constexpr,
    USE_SOFTCAP: tl.constexpr, SLIDING_WINDOW: tl.constexpr,
    stride_k_cache_0: tl.int64, stride_k_cache_1: tl.int64, stride_k_cache_2: tl.int64,
    stride_v_cache_0: tl.int64, stride_v_cache_1: tl.int64, stride_v_cache_2: tl.int64,
    query_start_len_ptr, BLOCK_Q: tl.constexpr, num_seqs: tl.int32, BLOCK_M: tl.constexpr,
):
    q_block_global_idx = tl.program_id(0)
    kv_head_idx = tl.program_id(1)

    seq_idx = find_seq_idx(query_start_len_ptr, q_block_global_idx, num_seqs, BLOCK_Q, True)
    q_block_start_idx = tl.load(query_start_len_ptr + seq_idx) // BLOCK_Q + seq_idx
    q_block_local_idx = q_block_global_idx - q_block_start_idx
    cur_batch_in_all_start_index = tl.load(query_start_len_ptr + seq_idx)
    cur_batch_in_all_stop_index = tl.load(query_start_len_ptr + seq_idx + 1)
    cur_batch_query_len = cur_batch_in_all_stop_index - cur_batch_in_all_start_index
    if q_block_local_idx * BLOCK_Q >= cur_batch_query_len:
        return

    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_SIZE_PADDED)
    offs_t = tl.arange(0, TILE_SIZE)
    query_pos = q_block_local_idx * BLOCK_Q + offs_m // num_queries_per_kv
    query_offset_0 = cur_batch_in_all_start_index + query_pos
    query_offset_1 = kv_head_idx * num_queries_per_kv + offs_m % num_queries_per_kv
    query_offset = query_offset_0[:, None] * query_stride_0 + query_offset_1[:, None] * query_stride_1 + offs_d[None, :]

    dim_mask = tl.where(offs_d < HEAD_SIZE, 1, 0).to(tl.int1)
    query_mask_0 = tl.where(query_pos < cur_batch_query_len, 1, 0).to(tl.int1)
    query_mask_1 = tl.where(query_offset_1 < num_query_heads, 1, 0).to(tl.int1)
    Q = tl.load(query_ptr + query_offset, mask=dim_mask[None, :] & query_mask_0[:, None] & query_mask_1[:, None],
                other=0.0)

    block_table_offset = seq_idx * block_table_stride
    M = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    L = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_SIZE_PADDED], dtype=tl.float32)

    seq_len = tl.load(seq_lens_ptr + seq_idx)
    context_len = seq_len - cur_batch_query_len
    max_seq_prefix_len = context_len + q_block_local_idx * BLOCK_Q + (BLOCK_M - 1) // num_queries_per_kv + 1
    max_seq_prefix_len = tl.minimum(max_seq_prefix_len, seq_len)
    num_tiles = cdiv_fn(max_seq_prefix_len, TILE_SIZE)

    for j in range(0, num_tiles):
        seq_offset = j * TILE_SIZE + offs_t
        tile_mask = seq_offset < max_seq_prefix_len
        physical_block_idx = tl.load(block_tables_ptr + block_table_offset + seq_offset // BLOCK_SIZE,
                                     mask=tile_mask, other=0).to(tl.int64)
        v_offset = (physical_block_idx[:, None] * stride_v_cache_0 + kv_head_idx * stride_v_cache_2
                    + offs_d[None, :] + (seq_offset % BLOCK_SIZE)[:, None] * stride_v_cache_1)
        k_offset = (physical_block_idx[None, :] * stride_k_cache_0 + kv_head_idx * stride_k_cache_2
                    + offs_d[:, None] + (seq_offset % BLOCK_SIZE)[None, :] * stride_k_cache_1)
        K = tl.load(key_cache_ptr + k_offset, mask=dim_mask[:, None] & tile_mask[None, :], other=0.0)
        V = tl.load(value_cache_ptr + v_offset, mask=dim_mask[None, :] & tile_mask[:, None], other=0.0)

        seq_mask = seq_offset[None, :] < context_len + query_pos[:, None] + 1
        S = tl.zeros(shape=(BLOCK_M, TILE_SIZE), dtype=tl.float32)
        S += scale * tl.dot(Q, K)
        S = tl.where(query_mask_1[:, None] & query_mask_0[:, None] & seq_mask, S, float("-inf"))
        m_j = tl.maximum(M, tl.max(S, axis=1))
        m_j = tl.where(m_j > float("-inf"), m_j, 0.0)
        P = tl.exp(S - m_j[:, None])
        l_j = tl.sum(P, axis=1)
        alpha = tl.exp(M - m_j)
        acc = acc * alpha[:, None]
        L = L * alpha + l_j
        M = m_j
        acc += tl.dot(P.to(V.dtype), V)

    acc = acc / L[:, None]
    output_offset = (query_offset_0[:, None] * output_stride_0 + query_offset_1[:, None] * output_stride_1
                     + offs_d[None, :])
    tl.store(output_ptr + output_offset, acc.to(output_ptr.dtype.element_ty),
             mask=dim_mask[None, :] & query_mask_0[:, None] & query_mask_1[:, None])


def unified_attention(q, k, v, out, cu_seqlens_q, seqused_k, softmax_scale, block_table):
    block_size = v.shape[1]
    num_seqs = len(seqused_k)
    num_query_heads = q.shape[1]
    num_kv_heads = k.shape[2]
    num_queries_per_kv = num_query_heads // num_kv_heads
    head_size = q.shape[2]
    BLOCK_M = 16 if num_queries_per_kv <= 16 else triton.next_power_of_2(num_queries_per_kv)
    BLOCK_Q = BLOCK_M // num_queries_per_kv
    total_num_q_blocks = q.shape[0] // BLOCK_Q + num_seqs
    kernel_unified_attention_2d[(total_num_q_blocks, num_kv_heads)](
        output_ptr=out, query_ptr=q, key_cache_ptr=k, value_cache_ptr=v, block_tables_ptr=block_table,
        seq_lens_ptr=seqused_k, scale=softmax_scale, num_query_heads=num_query_heads,
        num_queries_per_kv=num_queries_per_kv, block_table_stride=block_table.stride(0),
        query_stride_0=q.stride(0), query_stride_1=q.stride(1), output_stride_0=out.stride(0),
        output_stride_1=out.stride(1), BLOCK_SIZE=block_size, TILE_SIZE=32, HEAD_SIZE=head_size,
        HEAD_SIZE_PADDED=max(16, triton.next_power_of_2(head_size)), USE_SOFTCAP=False, SLIDING_WINDOW=0,
        stride_k_cache_0=k.stride(0), stride_k_cache_1=k.stride(1), stride_k_cache_2=k.stride(2),
        stride_v_cache_0=v.stride(0), stride_v_cache_1=v.stride(1), stride_v_cache_2=v.stride(2),
        query_start_len_ptr=cu_seqlens_q, BLOCK_Q=BLOCK_Q, num_seqs=num_seqs, BLOCK_M=BLOCK_M,
    )


def forward(q, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens):
    out = torch.empty_like(q)
    unified_attention(q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, q.shape[-1] ** -0.5, block_table)
    return out
