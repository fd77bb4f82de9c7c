"""Task: fused_moe_fp8_blockwise
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 447100968
Round: honest corpus

Idiom: a port in the style of vLLM's fused_moe_kernel with use_fp8_w8a8 and block_shape [128, 128]: scales loaded per K step at offs_ks, group_n column scales, BLOCK_SIZE_K = group_k."""

# Origin: written from the design of vLLM's vllm/model_executor/layers/fused_moe/fused_moe.py
# (fused_moe_kernel's use_fp8_w8a8 path with group_n/group_k, invoke_fused_moe_kernel, the
# block-quantised default config with BLOCK_SIZE_K equal to the block). vLLM aligns the slots with a
# CUDA op; a one-program Triton kernel stands in for it.

import torch
import triton
import triton.language as tl


@triton.jit
def moe_align_single_program(topk_ids_ptr, cnt_ptr, cursor_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                             num_experts, numel, n_sorted, n_blocks, block_size: tl.constexpr):
    for i in range(numel):
        e = tl.load(topk_ids_ptr + i)
        tl.store(cnt_ptr + e, tl.load(cnt_ptr + e) + 1)
    total = 0
    for e in range(num_experts):
        tl.store(cursor_ptr + e, total)
        padded = tl.cdiv(tl.load(cnt_ptr + e), block_size) * block_size
        for b in range(total // block_size, (total + padded) // block_size):
            tl.store(expert_ids_ptr + b, e)
        total += padded
    tl.store(post_pad_ptr, total)
    for b in range(total // block_size, n_blocks):
        tl.store(expert_ids_ptr + b, -1)
    for i in range(n_sorted):
        tl.store(sorted_ptr + i, numel)
    for i in range(numel):
        e = tl.load(topk_ids_ptr + i)
        pos = tl.load(cursor_ptr + e)
        tl.store(sorted_ptr + pos, i)
        tl.store(cursor_ptr + e, pos + 1)


@triton.jit
def fused_moe_kernel(a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                     num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens, stride_am, stride_ak, stride_be,
                     stride_bk, stride_bn, stride_cm, stride_cn, stride_asm, stride_ask, stride_bse, stride_bsk,
                     stride_bsn, group_n: tl.constexpr, group_k: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                     BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                     top_k: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= num_tokens_post_padded:
        return
    offs_token_id = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id).to(tl.int64)
    token_mask = offs_token < num_valid_tokens
    off_experts = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + off_experts * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    a_scale_ptrs = a_scale_ptr + (offs_token // top_k) * stride_asm
    offs_bsn = offs_bn // group_n
    b_scale_ptrs = b_scale_ptr + off_experts * stride_bse + offs_bsn * stride_bsn
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        k_start = k * BLOCK_SIZE_K
        offs_ks = k_start // group_k
        a_scale = tl.load(a_scale_ptrs + offs_ks * stride_ask, mask=token_mask, other=0.0)
        b_scale = tl.load(b_scale_ptrs + offs_ks * stride_bsk)
        accumulator += tl.dot(a, b) * a_scale[:, None] * b_scale[None, :]
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    accumulator = accumulator.to(c_ptr.dtype.element_ty)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, accumulator, mask=token_mask[:, None] & (offs_cn[None, :] < N))


def get_default_config(M, E, block_shape):
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": block_shape[0], "BLOCK_SIZE_K": block_shape[1], "GROUP_SIZE_M": 32}


def forward(a_q, a_scale, w_q, w_scale, topk_ids):
    M, K = a_q.shape
    E, N, _ = w_q.shape
    top_k = topk_ids.shape[1]
    block_shape = [128, 128]
    config = get_default_config(M, E, block_shape)
    block_size = config["BLOCK_SIZE_M"]
    device = a_q.device
    numel = topk_ids.numel()
    max_num_tokens_padded = numel + E * (block_size - 1)
    max_num_m_blocks = triton.cdiv(max_num_tokens_padded, block_size)
    sorted_token_ids = torch.empty((max_num_tokens_padded,), dtype=torch.int32, device=device)
    expert_ids = torch.empty((max_num_m_blocks,), dtype=torch.int32, device=device)
    num_tokens_post_padded = torch.empty((1,), dtype=torch.int32, device=device)
    scratch = torch.zeros((2 * E,), dtype=torch.int32, device=device)
    moe_align_single_program[(1,)](topk_ids, scratch, scratch[E:], sorted_token_ids, expert_ids,
                                   num_tokens_post_padded, E, numel, max_num_tokens_padded, max_num_m_blocks, block_size)
    C = torch.empty((M, top_k, N), dtype=torch.bfloat16, device=device)
    EM = sorted_token_ids.shape[0]
    grid = (triton.cdiv(EM, config["BLOCK_SIZE_M"]) * triton.cdiv(N, config["BLOCK_SIZE_N"]),)
    fused_moe_kernel[grid](a_q, w_q, C, a_scale, w_scale, sorted_token_ids, expert_ids, num_tokens_post_padded, N, K,
                           EM, numel, a_q.stride(0), a_q.stride(1), w_q.stride(0), w_q.stride(2), w_q.stride(1),
                           C.stride(1), C.stride(2), a_scale.stride(0), a_scale.stride(1), w_scale.stride(0),
                           w_scale.stride(2), w_scale.stride(1), group_n=block_shape[0], group_k=block_shape[1],
                           top_k=top_k, **config)
    return C
