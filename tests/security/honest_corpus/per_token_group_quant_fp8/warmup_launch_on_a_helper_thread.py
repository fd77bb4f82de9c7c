"""Task: per_token_group_quant_fp8
Backend: interpreter
Expect: paid
Policy: accepts
Workloads: all
Seed: 1
Round: honest corpus

Idiom: forward first warms the kernel up on a helper thread (a launch on a small tensor of the thread's own, joined before forward's own launch), as code that keeps compiles off its main thread does. The helper's launch is no forward call's: while a call is recorded it is neither recorded nor run (a recording once named the helper's tensor and refused the honest kernel)."""

import threading

import torch
import triton
import triton.language as tl

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, groups_per_row, stride_xm, eps, fp8_max, GROUP: tl.constexpr):
    g = tl.program_id(0)
    row = g // groups_per_row
    col = g % groups_per_row
    offs = tl.arange(0, GROUP)
    x = tl.load(x_ptr + row.to(tl.int64) * stride_xm + col * GROUP + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0), eps) / fp8_max
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + g.to(tl.int64) * GROUP + offs, q.to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def _quantize(x):
    M, K = x.shape
    groups_per_row = K // GROUP
    q = torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((M, groups_per_row), dtype=torch.float32, device=x.device)
    _quant_kernel[(M * groups_per_row,)](x, q, scales, groups_per_row, x.stride(0), EPS, FP8_MAX, GROUP=GROUP,
                                         num_warps=1)
    return q, scales


def _warm_up(device):
    _quantize(torch.zeros((1, GROUP), dtype=torch.bfloat16, device=device))


def forward(x):
    helper = threading.Thread(target=_warm_up, args=(x.device,), name="fp8-quant-warmup")
    helper.start()
    helper.join()
    return _quantize(x)
