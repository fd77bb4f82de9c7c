"""Task: w8a8_block_fp8_gemm
Backend: interpreter
Expect: paid
Policy: accepts
Seed: 1995599329
Round: honest corpus

Idiom: a port in the style of vLLM's block-fp8 Triton matmul (fp8_utils.py): block sizes as runtime group arguments, K-tail masks, a default config dict with a large program group."""

# Origin: written for this corpus after what vLLM's w8a8_block_fp8_matmul Triton kernel does
# (vllm/model_executor/layers/quantization/utils/fp8_utils.py): a flat grid in grouped order, rows and
# columns wrapped modulo M and N, K masked against its tail, the per-block scales looked up through
# the group sizes passed as runtime ints, and its default config when no tuned table matches. Adapted
# only to this task's signature (block size fixed at [128, 128], bf16 output).

import torch
import triton
import triton.language as tl


@triton.jit
def _w8a8_block_fp8_matmul(
    A, B, C, As, Bs,
    M, N, K,
    group_n, group_k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_As_m, stride_As_k, stride_Bs_k, stride_Bs_n,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = A + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = B + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    As_ptrs = As + offs_am * stride_As_m
    offs_bsn = offs_bn // group_n
    Bs_ptrs = Bs + offs_bsn * stride_Bs_n

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)

        k_start = k * BLOCK_SIZE_K
        offs_ks = k_start // group_k
        a_s = tl.load(As_ptrs + offs_ks * stride_As_k)
        b_s = tl.load(Bs_ptrs + offs_ks * stride_Bs_k)

        accumulator += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c = accumulator.to(C.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = C + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def forward(a, a_scales, b, b_scales):
    block_n, block_k = 128, 128
    M, K = a.shape
    N = b.shape[0]
    C = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    # The default config of the source, used when no tuned table matches the device and shape.
    config = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k, "GROUP_SIZE_M": 32,
              "num_warps": 4, "num_stages": 2}

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)

    _w8a8_block_fp8_matmul[grid](
        a, b, C, a_scales, b_scales,
        M, N, K,
        block_n, block_k,
        a.stride(-2), a.stride(-1), b.stride(1), b.stride(0), C.stride(-2), C.stride(-1),
        a_scales.stride(-2), a_scales.stride(-1), b_scales.stride(1), b_scales.stride(0),
        **config,
    )
    return C
