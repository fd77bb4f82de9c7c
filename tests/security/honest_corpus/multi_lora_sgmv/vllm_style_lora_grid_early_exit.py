"""Task: multi_lora_sgmv
Backend: interpreter
Expect: paid
Policy: accepts
Seed: 240771464
Round: honest corpus

Idiom: a port in the style of vLLM's Punica Triton ops (lora_shrink_op.py, lora_expand_op.py): an adapter axis in the grid with early exits, split-K shrink by atomics into a zeroed buffer, the expand adding into the output in place."""

# Origin: written for this corpus after what vLLM's _lora_shrink_kernel and _lora_expand_kernel do
# (vllm/lora/ops/triton_ops/): the grid's third axis is the adapter, a program returns at once when its
# adapter has no tokens or its row tile starts past them, rows are gathered through the tokens sorted by
# adapter, the shrink splits K and adds its scaled fp32 partials with atomics at the token's row, the expand
# casts them to the weights' dtype and adds its product into the output (ADD_INPUTS). Adapted to this task's
# signature: adapter slots are their own ids (the source looks ids up in lora_ids and counts in
# num_tokens_per_lora; here both come from lora_start), the scaling is per adapter, and since the task
# returns a new tensor, a copy kernel writes base into it before the expand adds to it.

import torch
import triton
import triton.language as tl


@triton.jit
def _lora_shrink_kernel(input_ptr, lora_ptr, out_ptr, M, N, K, token_indices_sorted_by_lora_ids, lora_token_start_loc,
                        scaling_ptr, input_d0_stride, input_d1_stride, lora_d0_stride, lora_d1_stride, lora_d2_stride,
                        lora_d3_stride, output_d0_stride, output_d1_stride, output_d2_stride,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    cta_n_num = tl.cdiv(N, BLOCK_N)
    cta_m_num = tl.cdiv(M, BLOCK_M)
    pid_sk_m_n = tl.program_id(axis=0)
    pid_sk = pid_sk_m_n % SPLIT_K
    pid_m = (pid_sk_m_n // SPLIT_K) % cta_m_num
    pid_n = pid_sk_m_n // (SPLIT_K * cta_m_num) % cta_n_num
    slice_id = tl.program_id(axis=1)
    lora_id = tl.program_id(axis=2)

    lora_m_indices_start = tl.load(lora_token_start_loc + lora_id)
    lora_m_size = tl.load(lora_token_start_loc + lora_id + 1) - lora_m_indices_start
    cta_m_offset = pid_m * BLOCK_M
    if cta_m_offset >= lora_m_size:
        return

    cta_m_len = min(BLOCK_M, lora_m_size - cta_m_offset)
    cta_lora_seq_indices = token_indices_sorted_by_lora_ids + lora_m_indices_start + cta_m_offset
    offset_m = tl.arange(0, BLOCK_M) % cta_m_len
    ram = tl.load(cta_lora_seq_indices + offset_m)

    offset_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offset_k = pid_sk * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptr = input_ptr + ram[:, None] * input_d0_stride + offset_k[None, :] * input_d1_stride
    b_ptr = (lora_ptr + slice_id * lora_d0_stride + lora_id * lora_d1_stride + offset_n[None, :] * lora_d2_stride
             + offset_k[:, None] * lora_d3_stride)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
        k_remaining = K - k * (BLOCK_K * SPLIT_K)
        tiled_a = tl.load(a_ptr, mask=offset_k[None, :] < k_remaining, other=0.0)
        tiled_b = tl.load(b_ptr, mask=(offset_k[:, None] < k_remaining) & (offset_n[None, :] < N), other=0.0)
        accumulator += tl.dot(tiled_a, tiled_b)
        a_ptr += BLOCK_K * SPLIT_K * input_d1_stride
        b_ptr += BLOCK_K * SPLIT_K * lora_d3_stride
    accumulator *= tl.load(scaling_ptr + lora_id)

    offset_cm = tl.arange(0, BLOCK_M)
    c_ptr = out_ptr + slice_id * output_d0_stride + ram[:, None] * output_d1_stride + offset_n[None, :] * output_d2_stride
    c_mask = (offset_cm[:, None] < cta_m_len) & (offset_n[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptr, accumulator, mask=c_mask)
    else:
        tl.atomic_add(c_ptr, accumulator, mask=c_mask)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < numel), mask=offs < numel)


@triton.jit
def _lora_expand_kernel(input_ptr, lora_ptr, out_ptr, M, N, K, token_indices_sorted_by_lora_ids, lora_token_start_loc,
                        input_d0_stride, input_d1_stride, input_d2_stride, ls_d0_stride, ls_d1_stride, ls_d2_stride,
                        ls_d3_stride, output_d0_stride, output_d1_stride,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ADD_INPUTS: tl.constexpr,
                        CAST_TYPE: tl.constexpr):
    cta_n_num = tl.cdiv(N, BLOCK_N)
    cta_m_num = tl.cdiv(M, BLOCK_M)
    pid_mn = tl.program_id(axis=0)
    pid_m = pid_mn % cta_m_num
    pid_n = (pid_mn // cta_m_num) % cta_n_num
    slice_id = tl.program_id(axis=1)
    lora_id = tl.program_id(axis=2)

    lora_m_indices_start = tl.load(lora_token_start_loc + lora_id)
    lora_m_size = tl.load(lora_token_start_loc + lora_id + 1) - lora_m_indices_start
    cta_m_offset = pid_m * BLOCK_M
    if cta_m_offset >= lora_m_size:
        return

    cta_m_len = min(BLOCK_M, lora_m_size - cta_m_offset)
    cta_lora_seq_indices = token_indices_sorted_by_lora_ids + lora_m_indices_start + cta_m_offset
    offset_m = tl.arange(0, BLOCK_M) % cta_m_len
    ram = tl.load(cta_lora_seq_indices + offset_m)

    offset_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offset_k = tl.arange(0, BLOCK_K)
    a_ptr = input_ptr + slice_id * input_d0_stride + ram[:, None] * input_d1_stride + offset_k[None, :] * input_d2_stride
    b_ptr = (lora_ptr + slice_id * ls_d0_stride + lora_id * ls_d1_stride + offset_n[None, :] * ls_d2_stride
             + offset_k[:, None] * ls_d3_stride)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        tiled_a = tl.load(a_ptr, mask=offset_k[None, :] < k_remaining, other=0.0)
        tiled_b = tl.load(b_ptr, mask=(offset_k[:, None] < k_remaining) & (offset_n[None, :] < N), other=0.0)
        if CAST_TYPE:
            tiled_a = tiled_a.to(lora_ptr.dtype.element_ty)
        accumulator += tl.dot(tiled_a, tiled_b)
        a_ptr += BLOCK_K * input_d2_stride
        b_ptr += BLOCK_K * ls_d3_stride

    offset_cm = tl.arange(0, BLOCK_M)
    offset_cn = slice_id * N + offset_n
    c_ptr = out_ptr + ram[:, None] * output_d0_stride + offset_cn[None, :] * output_d1_stride
    c_mask = (offset_cm[:, None] < cta_m_len) & (offset_n[None, :] < N)
    if ADD_INPUTS:
        tiled_out = tl.load(c_ptr, mask=c_mask, other=0.0)
        accumulator += tiled_out.to(tl.float32)
    tl.store(c_ptr, accumulator.to(out_ptr.dtype.element_ty), mask=c_mask)


def forward(x, base, lora_a, lora_b, scales, token_lora, sorted_tokens, lora_start):
    M, K = x.shape
    num_slices, max_loras, rank = lora_a.shape[:3]
    hidden_out = lora_b.shape[2]

    # shrink: BLOCK_M x BLOCK_N (rank) tiles, K split across programs
    shrink_config = {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": 8}
    buffer = torch.zeros((num_slices, M, rank), dtype=torch.float32, device=x.device)
    grid = (shrink_config["SPLIT_K"] * triton.cdiv(M, shrink_config["BLOCK_M"]) * triton.cdiv(rank, shrink_config["BLOCK_N"]),
            num_slices, max_loras)
    _lora_shrink_kernel[grid](x, lora_a, buffer, M, rank, K, sorted_tokens, lora_start, scales,
                              x.stride(0), x.stride(1), lora_a.stride(0), lora_a.stride(1), lora_a.stride(2),
                              lora_a.stride(3), buffer.stride(0), buffer.stride(1), buffer.stride(2), **shrink_config)

    out = torch.empty_like(base)
    _copy_kernel[(triton.cdiv(base.numel(), 1024),)](base, out, base.numel(), BLOCK=1024)

    expand_config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 16}
    grid = (triton.cdiv(M, expand_config["BLOCK_M"]) * triton.cdiv(hidden_out, expand_config["BLOCK_N"]),
            num_slices, max_loras)
    _lora_expand_kernel[grid](buffer, lora_b, out, M, hidden_out, rank, sorted_tokens, lora_start,
                              buffer.stride(0), buffer.stride(1), buffer.stride(2), lora_b.stride(0), lora_b.stride(1),
                              lora_b.stride(2), lora_b.stride(3), out.stride(0), out.stride(1),
                              ADD_INPUTS=True, CAST_TYPE=True, **expand_config)
    return out
