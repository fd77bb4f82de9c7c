"""Task: fused_moe_bf16
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 330719264
Round: honest corpus

Idiom: a port in the style of vLLM's fused_moe: one generic grouped GEMM kernel invoked twice (w1, then w2 with the routed weight), a separate silu_and_mul and moe_sum."""

# Origin: written from the design of vLLM's vllm/model_executor/layers/fused_moe/fused_moe.py
# (fused_moe_kernel, invoke_fused_moe_kernel, get_default_config, fused_experts): align the slots to
# BLOCK_SIZE_M, run the generic kernel on w1 into intermediate_cache1, silu_and_mul into
# intermediate_cache2, the kernel on w2 with MUL_ROUTED_WEIGHT into intermediate_cache3, then sum over
# top_k. vLLM's align, activation and sum are CUDA ops; Triton kernels stand in for them here.

import torch
import triton
import triton.language as tl


@triton.jit
def moe_align_stage1(topk_ids_ptr, tokens_cnts_ptr, cumsum_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                     num_experts, numel, n_sorted, n_blocks, block_size: tl.constexpr):
    # One program: count, scan, place (decode-sized metadata; vLLM does this in one CUDA block too).
    for i in range(numel):
        e = tl.load(topk_ids_ptr + i)
        tl.store(tokens_cnts_ptr + e, tl.load(tokens_cnts_ptr + e) + 1)
    total = 0
    for e in range(num_experts):
        tl.store(cumsum_ptr + e, total)
        cnt = tl.load(tokens_cnts_ptr + e)
        padded = tl.cdiv(cnt, block_size) * block_size
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
        pos = tl.load(cumsum_ptr + e)
        tl.store(sorted_ptr + pos, i)
        tl.store(cumsum_ptr + e, pos + 1)


@triton.jit
def fused_moe_kernel(a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                     num_tokens_post_padded_ptr, N, K, EM, num_valid_tokens, stride_am, stride_ak, stride_be,
                     stride_bk, stride_bn, stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr,
                     BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                     MUL_ROUTED_WEIGHT: tl.constexpr, top_k: tl.constexpr):
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
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if MUL_ROUTED_WEIGHT:
        moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0)
        accumulator = accumulator * moe_weight[:, None]
    accumulator = accumulator.to(c_ptr.dtype.element_ty)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, accumulator, mask=token_mask[:, None] & (offs_cn[None, :] < N))


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def moe_sum_kernel(x_ptr, out_ptr, top_k, hidden, BLOCK: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < hidden
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in range(top_k):
        acc += tl.load(x_ptr + (token * top_k + j) * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + token * hidden + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def get_default_config(M, E):
    if M <= E:
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}


def invoke_fused_moe_kernel(A, B, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
                            mul_routed_weight, top_k, config):
    EM = sorted_token_ids.shape[0]
    N, K = B.shape[1], B.shape[2]
    grid = (triton.cdiv(EM, config["BLOCK_SIZE_M"]) * triton.cdiv(N, config["BLOCK_SIZE_N"]),)
    fused_moe_kernel[grid](A, B, C, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded, N, K, EM,
                           topk_weights.numel(), A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1),
                           C.stride(0), C.stride(1), MUL_ROUTED_WEIGHT=mul_routed_weight, top_k=top_k, **config)


def forward(hidden_states, w1, w2, topk_weights, topk_ids):
    M, H = hidden_states.shape
    E, N, _ = w1.shape
    top_k = topk_ids.shape[1]
    config = get_default_config(M, E)
    block_size = config["BLOCK_SIZE_M"]
    device = hidden_states.device
    numel = topk_ids.numel()
    max_num_tokens_padded = numel + E * (block_size - 1)
    max_num_m_blocks = triton.cdiv(max_num_tokens_padded, block_size)
    sorted_token_ids = torch.empty((max_num_tokens_padded,), dtype=torch.int32, device=device)
    expert_ids = torch.empty((max_num_m_blocks,), dtype=torch.int32, device=device)
    num_tokens_post_padded = torch.empty((1,), dtype=torch.int32, device=device)
    scratch = torch.zeros((2 * E,), dtype=torch.int32, device=device)
    moe_align_stage1[(1,)](topk_ids, scratch, scratch[E:], sorted_token_ids, expert_ids, num_tokens_post_padded, E,
                           numel, max_num_tokens_padded, max_num_m_blocks, block_size)

    intermediate_cache1 = torch.empty((numel, N), dtype=hidden_states.dtype, device=device)
    intermediate_cache2 = torch.empty((numel, N // 2), dtype=hidden_states.dtype, device=device)
    intermediate_cache3 = torch.empty((numel, H), dtype=hidden_states.dtype, device=device)
    invoke_fused_moe_kernel(hidden_states, w1, intermediate_cache1, topk_weights, sorted_token_ids, expert_ids,
                            num_tokens_post_padded, False, top_k, config)
    silu_and_mul_kernel[(numel, triton.cdiv(N // 2, 1024))](intermediate_cache1, intermediate_cache2, N // 2,
                                                           BLOCK=1024)
    invoke_fused_moe_kernel(intermediate_cache2, w2, intermediate_cache3, topk_weights, sorted_token_ids, expert_ids,
                            num_tokens_post_padded, True, 1, config)
    out = torch.empty((M, H), dtype=hidden_states.dtype, device=device)
    moe_sum_kernel[(M, triton.cdiv(H, 1024))](intermediate_cache3, out, top_k, H, BLOCK=1024)
    return out
