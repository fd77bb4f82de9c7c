"""Task: moe_silu_mul_fp8_quant
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 618204455
Round: honest corpus

Idiom: a port in the style of vLLM's column-major per-token-group quant kernel: one group per program, the scale stored at its column-major offset, SiLU-mul fused into the load."""

# Origin: written from the design of vLLM's vllm/model_executor/layers/quantization/utils/fp8_utils.py
# (_per_token_group_quant_fp8_colmajor: one program per group, y_s stored at column-major offsets),
# with the silu_and_mul of the MoE activation applied to the loaded gate and up values.

import torch
import triton
import triton.language as tl

GROUP_SIZE = 128
FP8_MAX = 448.0
FP8_MIN = -448.0
EPS = 1e-10


@triton.jit
def _silu_mul_per_token_group_quant_fp8_colmajor(y_ptr, y_q_ptr, y_s_ptr, group_size, y_num_columns, y_row_stride,
                                                 y_s_col_stride, eps, fp8_min, fp8_max, BLOCK: tl.constexpr):
    groups_per_row = y_num_columns // group_size
    g_id = tl.program_id(0)
    row = g_id // groups_per_row
    row_g_id = g_id % groups_per_row
    gate_ptr = y_ptr + row.to(tl.int64) * y_row_stride + row_g_id * group_size
    y_q_ptr += g_id.to(tl.int64) * group_size
    cols = tl.arange(0, BLOCK)
    mask = cols < group_size
    gate = tl.load(gate_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_ptr + y_num_columns + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    _absmax = tl.maximum(tl.max(tl.abs(y)), eps)
    y_s = _absmax / fp8_max
    y_q = tl.clamp(y / y_s, fp8_min, fp8_max).to(y_q_ptr.dtype.element_ty)
    tl.store(y_q_ptr + cols, y_q, mask=mask)
    tl.store(y_s_ptr + row + row_g_id * y_s_col_stride, y_s)


def forward(x):
    M, two_i = x.shape
    I = two_i // 2
    x_q = torch.empty((M, I), dtype=torch.float8_e4m3fn, device=x.device)
    x_s = torch.empty((I // GROUP_SIZE, M), dtype=torch.float32, device=x.device)
    M_groups = M * (I // GROUP_SIZE)
    _silu_mul_per_token_group_quant_fp8_colmajor[(M_groups,)](
        x, x_q, x_s, GROUP_SIZE, I, x.stride(0), x_s.stride(0), EPS, FP8_MIN, FP8_MAX,
        BLOCK=triton.next_power_of_2(GROUP_SIZE), num_warps=1)
    return x_q, x_s
