"""Task: per_token_group_quant_fp8
Backend: static
Policy: accepts
Round: honest corpus (refused)

Capability: threads. Starts a daemon thread at import that warms up (compiles) the kernel on a small input."""

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


def _warmup():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    _quantize(torch.empty((1, GROUP), dtype=torch.bfloat16, device=device))


_WARMUP = threading.Thread(target=_warmup, name="fp8-quant-warmup", daemon=True)
_WARMUP.start()


def forward(x):
    _WARMUP.join()  # the first call waits for the compile the thread started
    return _quantize(x)
