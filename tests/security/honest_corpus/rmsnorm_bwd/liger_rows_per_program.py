"""Task: rmsnorm_bwd
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 2911405117
Round: honest corpus

Idiom: a port in the style of Liger-Kernel's RMSNorm backward: one program per SM walking `rows_per_program` rows with its dW row in registers, then the per-program rows summed."""

import math

import torch
import triton
import triton.language as tl

# Origin: a port in the style of Liger-Kernel's RMSNorm backward (src/liger_kernel/ops/rms_norm.py): one program
# per SM, each walking `rows_per_program` rows with its dW row accumulated in registers, strides passed for
# every tensor, `calculate_settings`-style block and warp choice, a weight offset argument. Written from what
# that kernel does, adapted to the task's signature: rstd is an input, and Liger's host `_dW.sum(dim=0)` over
# the per-program rows is a second Triton kernel here (forward may only launch kernels).

MAX_FUSED_SIZE = 65536


def calculate_settings(n):
    block_size = triton.next_power_of_2(n)
    if block_size > MAX_FUSED_SIZE:
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the maximum CUDA blocksize = "
                           f"{MAX_FUSED_SIZE}.")
    num_warps = 4
    if block_size >= 32768:
        num_warps = 32
    elif block_size >= 8192:
        num_warps = 16
    elif block_size >= 2048:
        num_warps = 8
    return block_size, num_warps


@triton.jit
def _rms_norm_backward_kernel(dY_ptr, dY_row_stride, dX_ptr, dX_row_stride, X_ptr, X_row_stride,
                              W_ptr, W_row_stride, RSTD_ptr, RSTD_row_stride, dW_ptr, dW_row_stride, n_rows, n_cols,
                              offset, rows_per_program, BLOCK_SIZE: tl.constexpr):
    row_block_id = tl.program_id(0).to(tl.int64)
    row_start = row_block_id * rows_per_program
    row_end = min((row_block_id + 1) * rows_per_program, n_rows)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dW_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)

    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0.0).to(tl.float32)
    W_row = W_row + offset

    for row_idx in range(row_start, row_end):
        dY_row = tl.load(dY_ptr + row_idx * dY_row_stride + col_offsets, mask=mask, other=0.0).to(tl.float32)
        X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0.0).to(tl.float32)
        rstd_row = tl.load(RSTD_ptr + row_idx * RSTD_row_stride)

        m = dY_row * W_row
        dX_row = rstd_row * m
        dX_row += rstd_row * (-(1 / n_cols) * rstd_row * rstd_row * tl.sum(m * X_row, axis=0) * X_row)

        dW_row += dY_row * (X_row * rstd_row)

        tl.store(dX_ptr + row_idx * dX_row_stride + col_offsets, dX_row.to(dX_ptr.dtype.element_ty), mask=mask)

    tl.store(dW_ptr + row_block_id * dW_row_stride + col_offsets, dW_row, mask=mask)


@triton.jit
def _sum_rows_kernel(src_ptr, src_row_stride, dst_ptr, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    col_offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for row_idx in range(0, n_rows):
        acc += tl.load(src_ptr + row_idx * src_row_stride + col_offsets, mask=mask, other=0.0)
    tl.store(dst_ptr + col_offsets, acc, mask=mask)


def rms_norm_backward(dY, X, W, RSTD, offset=0.0):
    shape = dY.shape
    dim = shape[-1]
    dY = dY.view(-1, dim)
    n_rows, n_cols = dY.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)

    sm_count = torch.cuda.get_device_properties(X.device).multi_processor_count
    # fp32 per-program partials of dW, summed below
    _dW = torch.empty((sm_count, n_cols), dtype=torch.float32, device=W.device)
    dX = torch.empty_like(dY)

    rows_per_program = math.ceil(n_rows / sm_count)
    grid = (sm_count,)
    _rms_norm_backward_kernel[grid](
        dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W, W.stride(0), RSTD, RSTD.stride(0),
        _dW, _dW.stride(0), n_rows, n_cols, offset, rows_per_program, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )
    dW = torch.empty((n_cols,), dtype=torch.float32, device=W.device)
    _sum_rows_kernel[(triton.cdiv(n_cols, 256),)](_dW, _dW.stride(0), dW, sm_count, n_cols, BLOCK_SIZE=256)
    dX = dX.view(*shape)
    return dX, dW


def forward(dy, x, weight, rstd):
    return rms_norm_backward(dy, x, weight, rstd)
