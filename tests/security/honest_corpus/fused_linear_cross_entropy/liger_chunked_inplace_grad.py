"""Task: fused_linear_cross_entropy
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1403558270
Round: honest corpus

Idiom: a port in the style of Liger-Kernel's fused linear cross-entropy: power-of-two token chunks sized from V / H, a row kernel with a scalar online softmax that overwrites the logits with their gradient, the loss in a per-token buffer."""

import torch
import triton
import triton.language as tl

# Origin: a port in the style of Liger-Kernel's fused_linear_cross_entropy_forward
# (src/liger_kernel/ops/fused_linear_cross_entropy.py) and liger_cross_entropy_kernel
# (src/liger_kernel/ops/cross_entropy.py): chunk_size = next_power_of_2(cdiv(BT, cdiv(V, H))), per chunk the
# logits, a program per row that skips ignored rows, finds max and denominator with scalar running values
# over blocks of the row, writes softmax / n over the logits and subtracts 1 / n at the target, then
# grad_input = dz @ W and grad_weight += dz^T @ x. Written from what those functions do, adapted to the task's
# signature and forward contract: the matmuls are a plain Triton GEMM (Liger calls torch.matmul / addmm), the
# count of tokens with a target stays on the device (Liger calls .item()), one chunk buffer is reused (Liger
# allocates one per chunk), grad_weight is fp32 and the loss is summed by a kernel (Liger calls torch.sum).

MAX_FUSED_SIZE = 65536 // 2
IGNORE_INDEX = -100


@triton.jit
def count_non_ignore_kernel(Y_ptr, out_ptr, n_rows, ignore_index, BLOCK_SIZE: tl.constexpr):
    total = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for i in range(0, n_rows, BLOCK_SIZE):
        offsets = i + tl.arange(0, BLOCK_SIZE)
        y = tl.load(Y_ptr + offsets, mask=offsets < n_rows, other=ignore_index)
        total += tl.where(y != ignore_index, 1.0, 0.0)
    tl.store(out_ptr, tl.sum(total, axis=0))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BETA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :].to(tl.int64) * stride_ak
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :].to(tl.int64) * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if BETA:
        acc += tl.load(c_ptrs, mask=c_mask, other=0.0).to(tl.float32)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def liger_cross_entropy_kernel(X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, n_non_ignore_ptr, ignore_index,
                               BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    Y_ptr += program_id
    y = tl.load(Y_ptr)
    X_ptr += program_id * X_stride

    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        tl.store(loss_ptr + program_id, 0.0)
    else:
        n_non_ignore = tl.load(n_non_ignore_ptr)
        m = float("-inf")
        d = 0.0
        ori_X_y = tl.load(X_ptr + y).cast(tl.float32)
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
            block_max = tl.max(X_block)
            m_new = tl.maximum(m, block_max)
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
            m = m_new
        lse = m + tl.log(d)

        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
            X_block = tl.exp(X_block - m) / d / n_non_ignore
            X_block = tl.where(X_offsets == y, X_block - 1.0 / n_non_ignore, X_block)
            tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)

        tl.store(loss_ptr + program_id, (lse - ori_X_y) / n_non_ignore)


@triton.jit
def sum_kernel(X_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    total = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for i in range(0, n, BLOCK_SIZE):
        offsets = i + tl.arange(0, BLOCK_SIZE)
        total += tl.load(X_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(total, axis=0))


def matmul(a, a_strides, b, b_strides, c, M, N, K, beta):
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, c, M, N, K, a_strides[0], a_strides[1], b_strides[0], b_strides[1], c.stride(0),
                        c.stride(1), BETA=beta, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)


def forward(_input, weight, target):
    device = _input.device
    BT, H = _input.shape
    V = weight.shape[0]
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(V))

    inc_factor = triton.cdiv(V, H)  # (V + H - 1) // H
    chunk_size = triton.next_power_of_2(triton.cdiv(BT, inc_factor))  # (BT + inc_factor - 1) // inc_factor
    num_chunks = triton.cdiv(BT, chunk_size)  # (BT + chunk_size - 1) // chunk_size

    grad_weight = torch.zeros((V, H), dtype=torch.float32, device=device)
    grad_input = torch.zeros_like(_input)
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=device)
    total_n_non_ignore = torch.empty(1, dtype=torch.float32, device=device)
    count_non_ignore_kernel[(1,)](target, total_n_non_ignore, BT, IGNORE_INDEX, BLOCK_SIZE=1024)
    logits_buffer = torch.empty((chunk_size, V), dtype=_input.dtype, device=device)

    for chunk_id in range(num_chunks):
        start_idx = chunk_id * chunk_size
        end_idx = min((chunk_id + 1) * chunk_size, BT)
        n_rows = end_idx - start_idx
        _input_chunk = _input[start_idx:end_idx]  # chunk_size x H
        logits_chunk = logits_buffer[:n_rows]  # chunk_size x V
        matmul(_input_chunk, (H, 1), weight, (1, H), logits_chunk, n_rows, V, H, False)
        target_chunk = target[start_idx:end_idx]  # chunk_size,
        loss_1d_slice = loss_1d[start_idx:end_idx]  # chunk_size,

        liger_cross_entropy_kernel[(n_rows,)](
            X_ptr=logits_chunk, X_stride=logits_chunk.stride(-2), Y_ptr=target_chunk, loss_ptr=loss_1d_slice,
            n_cols=V, n_non_ignore_ptr=total_n_non_ignore, ignore_index=IGNORE_INDEX, BLOCK_SIZE=BLOCK_SIZE,
            num_warps=32 if device.type == "cuda" else 1)

        grad_logits_chunk = logits_chunk  # chunk_size x V
        matmul(grad_logits_chunk, (V, 1), weight, (H, 1), grad_input[start_idx:end_idx], n_rows, H, V, False)
        matmul(grad_logits_chunk, (1, V), _input_chunk, (H, 1), grad_weight, V, H, n_rows, True)

    loss = torch.empty((), dtype=torch.float32, device=device)
    sum_kernel[(1,)](loss_1d, loss, BT, BLOCK_SIZE=1024)
    return loss, grad_input, grad_weight
