"""RMSNorm backward: expert Triton reference.

Memory-bound: dy and x are read once, dx written once (6*M*N bytes); everything else is small.
A grid of about two programs per SM, each walking a contiguous block of rows: per row, one pass
computes the row's dot product sum(dy*w*x_hat) and emits dx, while the program's share of dW
(sum of dy*x_hat over its rows) stays in fp32 registers across all its rows. Each program writes
one partial dW row at the end; a second tiny kernel sums the partials column by column. This is
FlashAttention's layout (programs walk many rows, dW partials in registers), which keeps the dW
reduction at a few MB of traffic instead of an atomic add per element.

Rows up to MAX_BLOCK wide (every catalogue width) live whole in registers: one HBM read of dy and
x per row. Wider rows are walked in chunks twice (dot product, then dx), the second pass from L2,
and their dW partial accumulates in the program's own row of the partial buffer (no atomics: the
row is the program's alone).
"""

import torch
import triton
import triton.language as tl

MAX_BLOCK = 8192       # widest row kept whole in registers: 16 warps x 32 threads x 16 fp32 per tensor
PROGRAMS_PER_SM = 2    # two resident programs per SM: one's loads in flight while the other reduces
CPU_PROGRAMS = 16      # the interpreter has no SMs; enough programs that held-out rows exceed them
MIN_ROWS = 2           # rows per program at least: the row loop and its dW carry run on every shape
DW_BLOCK = 256         # columns per program of the partial reduction


@triton.jit
def _rmsnorm_bwd_rows(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_part_ptr, M, rows_per_program,
                      N: tl.constexpr, BLOCK: tl.constexpr, WHOLE_ROW: tl.constexpr):
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    # The last program's block is cut at M.
    row_end = tl.minimum(row_start + rows_per_program, M)
    part = dw_part_ptr + pid.to(tl.int64) * N
    if WHOLE_ROW:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        # The weight is the same for every row: loaded once per program.
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dw = tl.zeros([BLOCK], dtype=tl.float32)
        for row in tl.range(row_start, row_end):
            base = row.to(tl.int64) * N  # int64: M*N passes 2^31 on large workloads
            rstd = tl.load(rstd_ptr + row)
            # dy and x are read once from HBM and never again: evict them first.
            dy = tl.load(dy_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            x_hat = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32) * rstd
            g = dy * w
            # Masked lanes are zero in g and x_hat: they add nothing; the mean divides by the true N.
            c = tl.sum(g * x_hat, axis=0) / N
            tl.store(dx_ptr + base + cols, (rstd * (g - x_hat * c)).to(dx_ptr.dtype.element_ty), mask=mask)
            dw += dy * x_hat
        tl.store(part + cols, dw, mask=mask)
    else:
        # Wider rows: chunk by chunk. The partial buffer starts at zero (the host allocates it so).
        for row in tl.range(row_start, row_end):
            base = row.to(tl.int64) * N
            rstd = tl.load(rstd_ptr + row)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for start in tl.range(0, N, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                mask = cols < N
                dy = tl.load(dy_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
                x = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
                w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                acc += dy * w * x
            c = tl.sum(acc, axis=0) * rstd / N
            for start in tl.range(0, N, BLOCK):
                cols = start + tl.arange(0, BLOCK)
                mask = cols < N
                dy = tl.load(dy_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
                x_hat = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32) * rstd
                w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                tl.store(dx_ptr + base + cols, (rstd * (dy * w - x_hat * c)).to(dx_ptr.dtype.element_ty), mask=mask)
                tl.store(part + cols, tl.load(part + cols, mask=mask, other=0.0) + dy * x_hat, mask=mask)


@triton.jit
def _sum_partials(dw_part_ptr, dw_ptr, programs, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for p in tl.range(0, programs):
        acc += tl.load(dw_part_ptr + p.to(tl.int64) * N + cols, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, acc, mask=mask)


def forward(dy, x, weight, rstd):
    M, N = x.shape
    assert dy.shape == (M, N) and weight.shape == (N,) and rstd.shape == (M,)
    assert dy.is_contiguous() and x.is_contiguous() and weight.is_contiguous() and rstd.is_contiguous()
    if x.device.type == "cuda":
        most = PROGRAMS_PER_SM * torch.cuda.get_device_properties(x.device).multi_processor_count
    else:
        most = CPU_PROGRAMS
    rows_per_program = max(MIN_ROWS, triton.cdiv(M, most))
    programs = triton.cdiv(M, rows_per_program)
    whole_row = triton.next_power_of_2(N) <= MAX_BLOCK
    block = triton.next_power_of_2(N) if whole_row else MAX_BLOCK
    # A wide row's partial is accumulated in place: it must start at zero. A whole row's is stored once.
    alloc = torch.empty if whole_row else torch.zeros
    dw_part = alloc((programs, N), dtype=torch.float32, device=x.device)
    dx = torch.empty_like(x)
    dw = torch.empty((N,), dtype=torch.float32, device=x.device)
    num_warps = max(1, min(16, block // 512))
    _rmsnorm_bwd_rows[(programs,)](dy, x, weight, rstd, dx, dw_part, M, rows_per_program, N=N, BLOCK=block,
                                   WHOLE_ROW=whole_row, num_warps=num_warps)
    _sum_partials[(triton.cdiv(N, DW_BLOCK),)](dw_part, dw, programs, N, BLOCK=DW_BLOCK, num_warps=4)
    return dx, dw
