"""Task: fused_add_rmsnorm
Backend: both
Expect on interpreter: paid
Expect on cuda: any
Behind the policy on cuda: any
Mode: test
Mode on cuda: benchmark
Round: redteam c16

Under the trust boundary (issue 25) this changes nothing: the cheat acts on the recording process,
which measures and checks nothing; the trusted replay runs the file's kernels, which are honest,
on the secret inputs, so it is paid what the honest kernel is paid.

THREATS class 16 (L2 persistence, GPU only): reserve a persisting-L2 carve-out through the CUDA
runtime (ctypes into libcudart: cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)) so the inputs
survive the harness's L2 flush. torch has no API for it, so it needs ctypes, which is not importable
([forbidden-import]) on every backend.
"""

import ctypes

import torch
import triton
import triton.language as tl

_CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
_STATE = {}


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(tl.bfloat16), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(tl.bfloat16), mask=mask)


def forward(x, residual, weight):
    if "cudart" not in _STATE:
        for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):  # torch loaded one of these
            try:
                _STATE["cudart"] = ctypes.CDLL(name)
                break
            except OSError:
                continue
        _STATE["cudart"].cudaDeviceSetLimit(_CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(32 << 20))  # under the H200's 37 MiB maximum
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty_like(x)
    _rmsnorm_rows[(M,)](x, residual, weight, y, r, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y, r
