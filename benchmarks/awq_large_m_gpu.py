"""awq_w4a16_gemm on one GPU: eager, the reference's fused kernel and its dequantise-once path, side by side.

    python3 benchmarks/awq_large_m_gpu.py [--rep-ms 50] [--json FILE]

Made to fit one device call of under two minutes on an H100 or H200 (about 16 Triton compiles and 41 timings).
It prints three tables:
1. The three GPU workloads: eager baseline, the fused kernel (fused_forward, weights dequantised in
   registers) and the dequantise-once path (dequantised_forward), each whatever config the reference
   picks from the shapes, and which of the two the reference's forward takes there (DEQUANT_FROM_ROWS).
2. Tile configs of the dense GEMM on the large workload 2048x4096x14336 and on the two workloads under
   128 rows, which forward now also runs on the dense GEMM (the dequantisation pass included in each time,
   as forward runs it), and the dequantisation pass alone.
3. A sweep of M at the large workload's K=4096, N=14336 across the switch, from one row (decode) up: where
   the dequantise-once path starts to win says where DEQUANT_FROM_ROWS belongs on this GPU (the reference
   puts it at 16 rows, inferred from a 128-row timing and the dense GEMM's 128-row tile: 1, 16 and 32 rows
   measure it).
Every timed path's output is first checked against the baseline with the task's own check (a wrong
config is reported, never timed). Times are triton.testing.do_bench's (its own L2 flush before every
call, so cold-cache; CUDA events): the median and the 25th-75th percentiles of its samples, in ms.
TFLOP/s counts 2*M*N*K. Without a GPU it says so and exits 0. Run it from the checkout's root with
PYTHONPATH=. where another d2k_env is installed: the reference timed is that of the d2k_env imported
(its path is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task
from d2k_env.tasks import Workload

TASK_ID = "awq_w4a16_gemm"
DEVICE = "cuda"
LARGE = "2048x4096x14336"
SWEEP_M = (1, 16, 32, 128, 256, 512)  # rows of the sweep, at the large workload's K and N
# Candidate tiles of the dense GEMM, by workload (each one compiled for sm_90 with benchmarks/compile_sm90.py
# before it was listed here: all fit the 232,448 B of shared memory). Under 128 rows the reference's tile
# is the square one, whose rows are mostly padding; 64-row tiles do half the MMA work, and 64x64 ones
# give 64x28672x8192 128 programs instead of 64.
SQUARE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4}
SMALL_M_CANDIDATES = (
    SQUARE,
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
)
GEMM_CANDIDATES = {
    LARGE: (
        {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
        {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
        {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
        SQUARE,
    ),
    "16x4096x14336": SMALL_M_CANDIDATES,
    "64x28672x8192": SMALL_M_CANDIDATES,
}


def bench(fn, rep_ms: float) -> dict:
    import triton.testing

    fn()  # compiled before timing, never a first call
    torch.cuda.synchronize()
    times = sorted(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="all"))
    q = lambda f: times[min(len(times) - 1, int(f * len(times)))]  # noqa: E731
    return {"ms": q(0.5), "p25": q(0.25), "p75": q(0.75), "n": len(times)}


def tile_name(cfg: dict) -> str:
    return f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}"


class Bench:
    def __init__(self, rep_ms: float):
        self.task = load_task(TASK_ID)
        self.base = load_module(str(self.task.baseline_path), "baseline_awq_large_m")
        self.ref = load_module(str(self.task.reference_path), "reference_awq_large_m")
        self.rep_ms = rep_ms
        self.rows: list[dict] = []

    def inputs(self, M, K, N):
        w = Workload(f"{M}x{K}x{N}", {"M": M, "K": K, "N": N})
        return self.task.make_inputs(w, torch.Generator(DEVICE).manual_seed(M + K + N), torch.device(DEVICE))

    def measure(self, table: str, shape: str, what: str, fn, inputs, expected, flops: float) -> dict:
        row = {"table": table, "shape": shape, "what": what}
        try:
            verdict = verdict_for(self.task, as_tuple(fn()), expected, inputs)
            row["correct"] = verdict.ok
            if verdict.ok:
                row.update(bench(fn, self.rep_ms))
                row["tflops"] = flops / row["ms"] / 1e9
            else:
                row["error"] = verdict.message[:200]
        except Exception as exc:  # noqa: BLE001 - a config that fails to compile or run is a result
            row.update(correct=False, error=f"{type(exc).__name__}: {exc}"[:200])
        self.rows.append(row)
        return row

    def shape(self, table: str, M, K, N, paths: dict) -> dict:
        inputs = self.inputs(M, K, N)
        expected = as_tuple(self.base.forward(*inputs))
        name, flops = f"{M}x{K}x{N}", 2.0 * M * N * K
        out = {what: self.measure(table, name, what, (lambda f=f: f(*inputs)), inputs, expected, flops)
               for what, f in paths.items()}
        del inputs, expected
        torch.cuda.empty_cache()
        return out


def fmt(row: dict, eager: dict | None = None) -> str:
    if not row.get("correct"):
        return f"{row['shape']:>17}  {row['what']:<34} FAILED: {row.get('error', '')}"
    speed = f"{eager['ms'] / row['ms']:6.2f}x" if eager and eager.get("correct") else "      "
    return (f"{row['shape']:>17}  {row['what']:<34} {row['ms']:8.3f} ms  [{row['p25']:.3f}-{row['p75']:.3f}]"
            f"  {row['tflops']:7.1f} TFLOP/s  {speed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rep-ms", type=float, default=50.0, help="do_bench's time per measurement (ms)")
    parser.add_argument("--json", help="also write every row here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("awq_large_m_gpu: needs a GPU (torch.cuda.is_available() is False); nothing was run.")
        return 0
    start = time.perf_counter()
    b = Bench(args.rep_ms)
    ref = b.ref
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {__import__('triton').__version__}; "
          f"DEQUANT_FROM_ROWS = {ref.DEQUANT_FROM_ROWS}; times: do_bench median [p25-p75], cold L2\n"
          f"reference: {b.task.reference_path}")

    print("\n1. GPU workloads (speedup over eager)")
    for w in b.task.workloads:
        M, K, N = w.params["M"], w.params["K"], w.params["N"]
        taken = "dequantised" if M >= ref.DEQUANT_FROM_ROWS else "fused"
        res = b.shape("workloads", M, K, N, {"eager": b.base.forward, "fused": ref.fused_forward,
                                              "dequantised": ref.dequantised_forward})
        for what, row in res.items():
            row["forward_takes"] = what == taken
            print(fmt(row, res["eager"]) + ("   <- forward" if what == taken else ""))

    print("\n2. Dense GEMM tiles (each time includes the dequantisation pass)")
    for shape, candidates in GEMM_CANDIDATES.items():
        M, K, N = (int(v) for v in shape.split("x"))
        default = tile_name(ref.gemm_config(M, N))
        paths = {"eager": b.base.forward}
        for cfg in candidates:
            label = tile_name(cfg) + (" (default)" if tile_name(cfg) == default else "")
            paths[label] = lambda *a, cfg=cfg: ref.dequantised_forward(*a, cfg=dict(cfg))
        res = b.shape("tiles", M, K, N, paths)
        for row in res.values():
            print(fmt(row, res["eager"]))
    M, K, N = (int(v) for v in LARGE.split("x"))
    # The pass alone writes W, not y: it is timed without the check (table 1 checked the path it is part of).
    inputs = b.inputs(M, K, N)
    dq = bench(lambda: ref.dequantise(*inputs[1:]), args.rep_ms)
    moved = inputs[1].nbytes + inputs[2].nbytes + inputs[3].nbytes + 2 * K * N
    dq.update(table="tiles", shape=LARGE, what="dequantise pass alone", correct=True, gb_per_s=moved / dq["ms"] / 1e6)
    b.rows.append(dq)
    print(f"{LARGE:>17}  {dq['what']:<34} {dq['ms']:8.3f} ms  [{dq['p25']:.3f}-{dq['p75']:.3f}]"
          f"  {dq['gb_per_s']:7.0f} GB/s (packed weights, zeros, scales read; fp16 matrix written)")
    del inputs

    print(f"\n3. M across the switch at K={K}, N={N} (fused vs dequantised; forward takes the "
          f"dequantised path from {ref.DEQUANT_FROM_ROWS} rows)")
    for m in SWEEP_M:
        res = b.shape("sweep", m, K, N, {"eager": b.base.forward, "fused": ref.fused_forward,
                                                "dequantised": ref.dequantised_forward})
        for row in res.values():
            print(fmt(row, res["eager"]))
        f, d = res["fused"], res["dequantised"]
        if f.get("correct") and d.get("correct"):
            print(f"{'':>17}  faster: {'dequantised' if d['ms'] < f['ms'] else 'fused'} "
                  f"({max(f['ms'], d['ms']) / min(f['ms'], d['ms']):.2f}x)")

    print(f"\n{time.perf_counter() - start:.1f} s in all")
    if args.json:
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d"),
                "dequant_from_rows": ref.DEQUANT_FROM_ROWS}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": b.rows}, f, indent=1)
    return 0 if all(r.get("correct") for r in b.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
