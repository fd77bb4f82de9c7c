"""Task: swiglu_fwd_bwd
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1403558270
Round: honest corpus

Idiom: a port in the style of Liger-Kernel's SwiGLU: a row-per-program forward kernel rounding silu(a) to the input dtype, then a backward kernel recomputing the sigmoid."""

import torch
import triton
import triton.language as tl

# Origin: a port in the style of Liger-Kernel's SwiGLU (src/liger_kernel/ops/swiglu.py): one program per row
# with the whole row in one block (`calculate_settings`), a forward kernel rounding silu(a) to the input dtype
# before the product, and a backward kernel recomputing the sigmoid. Written from what those kernels do, adapted
# to the task's signature: both kernels run in one call, and the gradients go to new tensors where Liger
# overwrites a and b.

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
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_forward_kernel(a_ptr, b_ptr, c_ptr, stride, c_stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)

    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * c_stride

    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    # sigmoid requires type float32
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = silu(a_row).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


@triton.jit
def _swiglu_backward_kernel(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, stride, dc_stride, n_cols: tl.constexpr,
                            BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)

    dc_ptr += program_id * dc_stride
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    da_ptr += program_id * dc_stride
    db_ptr += program_id * dc_stride

    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dc_row = tl.load(dc_ptr + col_offsets, mask=mask, other=0)
    # sigmoid requires type float32
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)

    # recomputation to save memory
    sig_a = tl.sigmoid(a_row)
    silu_a = a_row * sig_a
    db_row = dc_row * silu_a
    da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row

    tl.store(da_ptr + col_offsets, da_row, mask=mask)
    tl.store(db_ptr + col_offsets, db_row, mask=mask)


def swiglu_forward(a, b):
    n_cols = a.shape[-1]
    c = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    n_rows = a.shape[0]
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _swiglu_forward_kernel[(n_rows,)](a, b, c, a.stride(0), c.stride(0), n_cols=n_cols, BLOCK_SIZE=BLOCK_SIZE,
                                      num_warps=num_warps)
    return c


def swiglu_backward(a, b, dc):
    n_cols = dc.shape[-1]
    n_rows = dc.shape[0]
    da = torch.empty_like(dc)
    db = torch.empty_like(dc)
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _swiglu_backward_kernel[(n_rows,)](dc, a, b, da, db, a.stride(0), dc.stride(0), n_cols=n_cols,
                                       BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return da, db


def forward(a, b, dc):
    c = swiglu_forward(a, b)
    da, db = swiglu_backward(a, b, dc)
    return c, da, db
