"""Side-by-side GPU timing of a baseline and a candidate (see ../shared/MEASURING.md).

Protocol: each side gets its own rotating input sets (never the warm-up set); before every timed
call the L2 is flushed (a buffer twice its size written, then another read), so numbers are
cold-cache and no call pays for the flush's write-back; CUDA events bracket each call, queued in
small batches behind a GPU spin that lets the host get ahead, so samples hold device time only,
never host launch latency; the whole device is synchronised before a batch and before its end
events are read; the two sides alternate A B, B A so drift hits both;
repetitions continue until both medians have a relative standard error under ``target_rse`` or the
time budget ends. Speedup = baseline median / candidate median, with a 95% interval that covers
run-to-run variation, not only this run's sampling noise: a bootstrap over whole batches (a
batch's samples share the moment they were taken, so resampling samples one by one pretends they
are independent), widened to at least ``ci_floor`` either side of the speedup, the spread measured
between separate runs of the same code (see ``CI_FLOOR``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch


_SPIN_CYCLES = 500_000  # ~0.25 ms at H200 clocks: time for the host to queue a batch of calls
_MAX_SPIN_CYCLES = 64 * _SPIN_CYCLES  # ~16 ms: a batch whose host side takes longer is timed as it is
# Relative half-width below which no interval is reported. Separate runs of the same reference on the
# H200 (fresh processes, minutes apart) moved the speedup of a launch-bound workload (64 rows) by
# 6-9% while each run's own bootstrap interval was under 2% wide; large workloads repeat within
# 0.8% (../shared/MEASURING.md). Rechecked by benchmarks/memory_safety_gpu.py, which runs one
# reference in several processes and asks whether each interval covers every other run's speedup.
CI_FLOOR = 0.01
LAUNCH_BOUND_CI_FLOOR = 0.09


@dataclass
class Timing:
    median_ms: float
    spread: float  # interquartile range / median
    samples: list[float]


@dataclass
class PairTiming:
    baseline: Timing
    candidate: Timing
    speedup: float
    speedup_ci: tuple[float, float]
    repetitions: int


class L2Flusher:
    """Leaves the L2 cold and clean: zeroes a buffer twice its size, then reads another as large.

    The write evicts everything (MEASURING.md's flush); the read evicts the write's own dirty lines,
    so their write-back happens here and not inside the next timed call. Left dirty, they cost an
    88 MB, 27 us kernel ~3 us on the H200 (benchmarks/NOTES.md), the same absolute tax on both
    sides, which pulls the speedups of short kernels towards 1.
    """

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
        n = 2 * l2 // 4 + 1
        self.buffer = torch.empty(n, dtype=torch.int32, device=device)
        self.clean = torch.zeros(n, dtype=torch.int32, device=device)
        self.sink = torch.empty((), dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()
        torch.amax(self.clean, dim=0, out=self.sink)


def _stats(samples: list[float]) -> Timing:
    a = np.asarray(samples)
    med = float(np.median(a))
    q1, q3 = np.percentile(a, [25, 75])
    return Timing(med, float((q3 - q1) / med) if med > 0 else 0.0, samples)


def _rse_of_median(samples: list[float]) -> float:
    """Relative standard error of the median (normal approximation, 1.2533 sigma / sqrt n)."""
    a = np.asarray(samples)
    med = np.median(a)
    return float(1.2533 * a.std(ddof=1) / math.sqrt(len(a)) / med) if len(a) > 1 and med > 0 else math.inf


def time_batch(calls: Sequence[tuple[Callable, Sequence]], flush: L2Flusher) -> list[float]:
    """Times each (fn, args) call, flushing the L2 before each.

    The batch is queued without host synchronisation behind a GPU spin, so that the device only
    starts once the host has queued every call and no sample includes the host's launch latency.
    An event after the spin proves it: if the spin was over before the host finished queuing, the
    device may have waited on the host, so the batch is thrown away and timed again behind a spin
    four times longer (up to ``_MAX_SPIN_CYCLES``, past which the samples are kept as they are).
    The device is synchronised before the batch and before any end event is read.
    """
    spin = _SPIN_CYCLES
    while True:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in calls]
        torch.cuda.synchronize()
        torch.cuda._sleep(spin)
        spin_over = torch.cuda.Event()
        spin_over.record()
        for (fn, args), (start, end) in zip(calls, events):
            flush()
            start.record()
            fn(*args)
            end.record()
        host_was_ahead = not spin_over.query()
        torch.cuda.synchronize()
        if host_was_ahead or spin >= _MAX_SPIN_CYCLES:
            return [start.elapsed_time(end) for start, end in events]
        spin *= 4


def time_pair(baseline: Callable, candidate: Callable, baseline_sets: Sequence[Sequence],
              candidate_sets: Sequence[Sequence], warmup_set_b: Sequence, warmup_set_c: Sequence,
              flush: L2Flusher, budget_s: float = 3.0, target_rse: float = 0.005,
              min_reps: int = 10, max_reps: int = 1000, batch: int = 5, seed: int = 0,
              ci_floor: float = CI_FLOOR) -> PairTiming:
    """Interleaved timing of two callables on their own input sets, in batches of ``batch`` pairs."""
    for _ in range(3):
        baseline(*warmup_set_b)
        candidate(*warmup_set_c)
    torch.cuda.synchronize()
    tb: list[float] = []
    tc: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(tb) < max_reps:
        calls = []
        for i in range(len(tb), len(tb) + batch):
            b = (baseline, baseline_sets[i % len(baseline_sets)])
            c = (candidate, candidate_sets[i % len(candidate_sets)])
            calls += [b, c] if i % 2 == 0 else [c, b]  # A B, B A: drift hits both sides alike
        samples = time_batch(calls, flush)
        for k, i in enumerate(range(len(tb), len(tb) + batch)):
            first, second = samples[2 * k], samples[2 * k + 1]
            tb.append(first if i % 2 == 0 else second)
            tc.append(second if i % 2 == 0 else first)
        if len(tb) >= min_reps and (max(_rse_of_median(tb), _rse_of_median(tc)) < target_rse
                                    or time.perf_counter() > deadline):
            break
    b, c = _stats(tb), _stats(tc)
    speedup = b.median_ms / c.median_ms
    return PairTiming(b, c, speedup, speedup_interval(tb, tc, batch, seed, ci_floor), len(tb))


def speedup_interval(tb: Sequence[float], tc: Sequence[float], batch: int, seed: int,
                     ci_floor: float) -> tuple[float, float]:
    """95% interval of baseline median / candidate median: whole batches resampled (the samples of
    one batch were taken together), then widened to at least ``ci_floor`` either side."""
    rng = np.random.default_rng(seed)
    ab, ac = np.asarray(tb).reshape(-1, batch), np.asarray(tc).reshape(-1, batch)
    idx = rng.integers(0, len(ab), size=(500, len(ab)))
    ratios = np.median(ab[idx].reshape(500, -1), axis=1) / np.median(ac[idx].reshape(500, -1), axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    speedup = float(np.median(ab) / np.median(ac))
    return float(min(lo, speedup * (1 - ci_floor))), float(max(hi, speedup * (1 + ci_floor)))


def graph_time(fn: Callable, args: Sequence, calls: int = 20, reps: int = 20) -> float | None:
    """Per-call time of ``fn`` replayed inside a CUDA graph (no launch gaps), warm L2.

    Returns None when ``fn`` cannot be captured (host synchronisation, say).
    """
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn(*args)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn(*args)
    except Exception:  # noqa: BLE001 - any capture failure means "not graphable", not an error
        torch.cuda.synchronize()
        return None
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return float(np.median(samples))


def measure_ceilings(device: torch.device) -> dict[str, float]:
    """Memory and compute ceilings measured now, best of many repetitions after a warm-up.

    ``copy_gbs``: a device-to-device copy (bytes read + written); ``read_gbs``: a streaming
    reduction (bytes read). Read-heavy kernels can beat the copy, so the roofline floor uses
    ``bandwidth_gbs``, the larger of the two; ``tflops``: a bf16 8192^3 GEMM.
    """
    n = 2**28  # 1 GiB of fp32
    copy_ms, read_ms = _stream_times(n, device)
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device=device)
    b = torch.randn(m, m, dtype=torch.bfloat16, device=device)
    gemm_ms = _best_event_time(lambda: a @ b, reps=10)
    copy_gbs, read_gbs = 2 * n * 4 / copy_ms / 1e6, n * 4 / read_ms / 1e6
    return {"bandwidth_gbs": max(copy_gbs, read_gbs), "copy_gbs": copy_gbs, "read_gbs": read_gbs,
            "tflops": 2 * m**3 / gemm_ms / 1e9}


def _stream_times(n: int, device: torch.device) -> tuple[float, float]:
    """Best times of a copy and of a streaming read of ``n`` fp32 values; the buffers are freed on return."""
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    return _best_event_time(lambda: dst.copy_(src)), _best_event_time(lambda: src.sum())


def _best_event_time(fn: Callable, reps: int = 20, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return min(samples)
