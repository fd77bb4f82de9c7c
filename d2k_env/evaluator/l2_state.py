"""CUDA L2 state a solution could change to be timed on cached data, read through ctypes (torch has
no API for either): the context's persisting-L2 set-aside, and the access-policy window of a stream.

Lines marked persisting survive the flush, and a window left on the stream applies to every kernel
launched there, the baseline's too. The worker releases the set-aside before the solution loads
and the launch counter (:mod:`d2k_env.evaluator.guards`) reads both at each of the solution's
launches; anything it sees is ``[l2-persistence]``.
"""

from __future__ import annotations

import ctypes
import functools

import torch

# The same values in the driver's CUlimit / CUstreamAttrID and the runtime's cudaLimit / cudaStreamAttrID.
LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def persisting_l2_bytes() -> int:
    """The current CUDA context's persisting-L2 set-aside in bytes (cuCtxGetLimit); 0 without a driver."""
    driver, value = _driver(), ctypes.c_size_t(0)
    if driver is None or driver.cuCtxGetLimit(ctypes.byref(value), LIMIT_PERSISTING_L2_CACHE_SIZE) != 0:
        return 0
    return value.value


def release_persisting_l2() -> None:
    """Sets the set-aside to 0 before the solution loads. A context may start with one (11 MiB on the
    H200, 2026-12-01), in which a stream's access-policy window alone would keep lines past the
    flush; with none, persisting accesses are normal ones, and any set-aside seen later is the
    solution's."""
    driver = _driver()
    if driver is not None and driver.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0)) != 0:
        raise RuntimeError("could not release the persisting-L2 set-aside (cuCtxSetLimit failed)")


class AccessPolicyWindow(ctypes.Structure):  # cudaAccessPolicyWindow
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):  # cudaStreamAttrValue: 64 bytes
    _fields_ = [("window", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


@functools.lru_cache(maxsize=1)
def cuda_runtime() -> ctypes.CDLL | None:
    """The CUDA runtime torch loaded (the one a stream handle belongs to)."""
    try:
        with open("/proc/self/maps") as maps:
            path = next((line.split()[-1] for line in maps if "/libcudart.so" in line), None)
        return ctypes.CDLL(path) if path else None
    except OSError:
        return None


def access_policy_window_bytes(stream: torch.cuda.Stream | None) -> int:
    """Bytes covered by the access-policy window on ``stream`` (0: none, or unreadable). Kernels
    launched into a stream inherit its window, the baseline's included: one left there changes how
    both sides use the L2 (the H200 ran the baseline 2.6-3.8x slower under h36's window)."""
    rt = cuda_runtime()
    if stream is None or rt is None:
        return 0
    value = StreamAttrValue()
    if rt.cudaStreamGetAttribute(ctypes.c_void_p(stream.cuda_stream), STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                 ctypes.byref(value)) != 0:
        rt.cudaGetLastError()  # leaves no sticky error for torch's next check
        return 0
    return value.window.num_bytes
