"""Experiment: what a persisting-L2 carve-out would buy a solution that got past the static policy
(THREATS class 16), and whether the worker's set-aside check sees it (benchmarks/NOTES.md).

The RMSNorm reference is timed against itself with the evaluator's protocol (time_pair: the flush
written and read before every call, interleaved, medians); the candidate side first sets, through
the CUDA runtime, an access-policy window marking its input x as persisting:
- ``kept``: the set-aside raised once and left in place (what h36 and c16 do), the window set
  on every call;
- ``toggled``: raised, the kernel run to completion, and the set-aside put back to 0 before forward
  returns, so the host never sees it between calls;
- ``no sync``: raised and put back to 0 around the launch without waiting for the kernel.
A ratio above 1 means the variant's timed calls read x from L2. ``set-aside seen`` is what
``l2_state.persisting_l2_bytes`` read after forward returned.

    PYTHONPATH=. python benchmarks/l2_persistence.py
"""

from __future__ import annotations

import ctypes

import torch

from d2k_env.evaluator.l2_state import (LIMIT_PERSISTING_L2_CACHE_SIZE, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                       StreamAttrValue, cuda_runtime, persisting_l2_bytes,
                                       release_persisting_l2)
from d2k_env.evaluator.timing import L2Flusher, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import Workload, load_task

_ATTR_MAX_PERSISTING_L2 = 108  # cudaDevAttrMaxPersistingL2CacheSize


class Persisting:
    """forward of the reference with x inside a persisting access-policy window on the current stream."""

    def __init__(self, forward, rt: ctypes.CDLL, set_aside: int, mode: str):
        self.forward, self.rt, self.set_aside, self.mode = forward, rt, set_aside, mode

    def limit(self, nbytes: int) -> None:
        assert self.rt.cudaDeviceSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(nbytes)) == 0

    def window(self, x: torch.Tensor | None) -> None:
        v = StreamAttrValue()  # num_bytes 0: no window
        if x is not None:
            v.window.base_ptr, v.window.num_bytes = x.data_ptr(), min(x.numel() * x.element_size(), self.set_aside)
        v.window.hit_ratio, v.window.hit_prop, v.window.miss_prop = 1.0, 2, 1  # persisting hits, streaming misses
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        assert self.rt.cudaStreamSetAttribute(stream, STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(v)) == 0

    def __call__(self, x, residual, weight):
        if self.mode != "kept" or not persisting_l2_bytes():
            self.limit(self.set_aside)
        self.window(x)
        out = self.forward(x, residual, weight)
        if self.mode == "toggled":
            torch.cuda.synchronize()
        if self.mode in ("toggled", "no sync"):
            self.limit(0)
        return out


def main() -> None:
    dev = torch.device("cuda")
    task = load_task("fused_add_rmsnorm")
    reference = load_module(str(task.reference_path), "reference_rmsnorm").forward
    rt = cuda_runtime()
    assert rt is not None, "the CUDA runtime torch loads was not found"
    props = torch.cuda.get_device_properties(dev)
    max_persisting = ctypes.c_int(0)
    assert rt.cudaDeviceGetAttribute(ctypes.byref(max_persisting), _ATTR_MAX_PERSISTING_L2, dev.index or 0) == 0
    set_aside = max_persisting.value
    flush = L2Flusher(dev)
    print(f"set-aside at start: {persisting_l2_bytes() >> 20} MiB; released to 0 as the worker does")
    release_persisting_l2()
    print(f"{props.name}, L2 {props.L2_cache_size >> 20} MiB, persisting set-aside max {set_aside >> 20} MiB")
    print(f"{'workload':<10} {'variant':<9} {'plain ms':>9} {'variant ms':>10} {'plain/variant':>13} {'95% CI':>13} "
          f"{'set-aside seen':>14}")
    for M, N in ((1024, 4096), (2048, 4096)):
        w = Workload(f"{M}x{N}", {"M": M, "N": N})
        sets_a, sets_b = ([task.make_inputs(w, torch.Generator(dev).manual_seed(s + k), dev) for k in range(3)]
                          for s in (10, 20))
        for mode in ("control", "kept", "toggled", "no sync"):
            cand = reference if mode == "control" else Persisting(reference, rt, set_aside, mode)
            p = time_pair(reference, cand, sets_a, sets_b, sets_a[0], sets_b[0], flush, budget_s=1.0)
            seen = persisting_l2_bytes()
            print(f"{w.name:<10} {mode:<9} {p.baseline.median_ms:>9.4f} {p.candidate.median_ms:>10.4f} "
                  f"{p.speedup:>13.3f} {p.speedup_ci[0]:>6.3f}-{p.speedup_ci[1]:.3f} {seen >> 20:>10} MiB",
                  flush=True)
            if mode != "control":
                cand.window(None)
                cand.limit(0)
                assert rt.cudaCtxResetPersistingL2Cache() == 0


if __name__ == "__main__":
    main()
