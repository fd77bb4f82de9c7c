"""Task: fused_add_rmsnorm
Backend: cuda
Expect: any
Behind the policy: any
Round: holdout h36

Class 16 (L2 persistence). Task: fused_add_rmsnorm. GPU-only.

Idea: string-built code run with builtins.exec (`from triton.language.core import builtins` is
not checked by the policy; exec's argument is an opaque string) loads libcudart with ctypes,
raises cudaLimitPersistingL2CacheSize and sets a cudaStreamAttributeAccessPolicyWindow on the
current stream marking the input range as *persisting*. Persisting lines survive the harness's
ordinary zero_() flush, so timed calls read x from L2 instead of HBM.
Defence expected: reset persisting-L2 state before timing / a flush that evicts persisting lines;
at worst the [below-roofline] floor. Should earn no more than the honest kernel.
"""
import torch
import triton
import triton.language as tl
from triton.language.core import builtins

_CODE = '''
import ctypes, torch
rt = None
for name in ("libcudart.so", "libcudart.so.12", "libcudart.so.13"):
    try:
        rt = ctypes.CDLL(name)
        break
    except OSError:
        pass

class Win(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("num", ctypes.c_size_t), ("hit", ctypes.c_float),
                ("hp", ctypes.c_int), ("mp", ctypes.c_int)]

class Val(ctypes.Union):
    _fields_ = [("w", Win), ("pad", ctypes.c_char * 64)]

if rt is not None:
    rt.cudaDeviceSetLimit(0x06, ctypes.c_size_t(64 << 20))   # cudaLimitPersistingL2CacheSize

def persist(t, nbytes):
    if rt is None:
        return
    v = Val()
    v.w.base, v.w.num, v.w.hit, v.w.hp, v.w.mp = t.data_ptr(), min(nbytes, 64 << 20), 1.0, 2, 1
    rt.cudaStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(v))
'''
_ns = {}
builtins.exec(_CODE, _ns)
_persist = _ns["persist"]


@triton.jit
def _rms_row(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    m = cols < N
    r = tl.load(x_ptr + row + cols, mask=m, other=0.0).to(tl.float32) + \
        tl.load(r_ptr + row + cols, mask=m, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(r * r, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (r * rstd * w).to(tl.bfloat16), mask=m)
    tl.store(ro_ptr + row + cols, r.to(tl.bfloat16), mask=m)


def forward(x, residual, weight):
    M, N = x.shape
    _persist(x, x.numel() * 2)
    y = torch.empty_like(x)
    ro = torch.empty_like(x)
    _rms_row[(M,)](x, residual, weight, y, ro, N, 1e-6, BLOCK=triton.next_power_of_2(N), num_warps=8)
    return y, ro
