"""Measure every expert reference against its eager baseline and torch.compile(baseline) on the GPU.

Uses the evaluator's own timing protocol (d2k_env.evaluator.timing: cold L2, interleaved, adaptive
repetitions, medians) so the numbers match what the env reports. Writes a markdown table and JSON:

    python benchmarks/bench_references.py --out benchmarks/results [--tasks a b]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
import triton

from d2k_env.evaluator.checking import as_tuple, verdict_for
import numpy as np

from d2k_env.evaluator.timing import L2Flusher, time_batch, graph_time, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task, task_ids


def same_size_copy_ms(nbytes: float, flush: L2Flusher, reps: int = 30) -> float:
    """Cold-L2 median time of a device copy moving ``nbytes`` (half read, half written)."""
    src = torch.empty(int(nbytes // 2) // 4, dtype=torch.int32, device="cuda").random_()
    dst = torch.empty_like(src)
    return float(np.median(time_batch([(dst.copy_, (src,))] * reps, flush)))


def bench_task(task_id: str, ceilings: dict, flush: L2Flusher, budget_s: float) -> list[dict]:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    compiled = torch.compile(baseline.forward, dynamic=False)
    dev = torch.device("cuda")
    rows = []
    for w in task.workloads:
        def inputs(seed):
            return task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
        check_in = inputs(0)
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in check_in]
        # The checked values: outputs, then the inputs a task updates in place (a state pool, q and k).
        expected = task.checked_values(as_tuple(baseline.forward(*copies)), copies)
        out = task.checked_values(as_tuple(reference.forward(*check_in)), check_in)
        verdict = verdict_for(task, out, expected, check_in)
        sets_a, sets_b, sets_c = ([inputs(s + k) for k in range(3)] for s in (10, 20, 30))
        warm = inputs(99)
        vs_eager = time_pair(baseline.forward, reference.forward, sets_a, sets_b, warm, warm, flush, budget_s)
        vs_compile = time_pair(compiled, reference.forward, sets_c, sets_b, warm, warm, flush, budget_s)
        roof = task.roofline(w).floor_ms(ceilings["bandwidth_gbs"], ceilings["tflops"])
        gbs = lambda ms: task.roofline(w).bytes / ms / 1e6
        ref_ms = vs_eager.candidate.median_ms
        copy_ms = same_size_copy_ms(task.roofline(w).bytes, flush)
        row = {
            "task": task_id, "workload": w.name, "correct": verdict.ok, "check": verdict.message,
            "launch_bound": w.launch_bound,
            "baseline_ms": vs_eager.baseline.median_ms, "baseline_spread": vs_eager.baseline.spread,
            "compile_ms": vs_compile.baseline.median_ms, "compile_spread": vs_compile.baseline.spread,
            "reference_ms": ref_ms, "reference_spread": vs_eager.candidate.spread,
            "reference_ms_in_compile_pair": vs_compile.candidate.median_ms,
            "speedup_vs_eager": vs_eager.speedup, "speedup_vs_eager_ci": vs_eager.speedup_ci,
            "speedup_vs_compile": vs_compile.speedup, "speedup_vs_compile_ci": vs_compile.speedup_ci,
            "roofline_ms": roof, "roofline_fraction": roof / ref_ms,
            "compile_roofline_fraction": roof / vs_compile.baseline.median_ms,
            "reference_copy_fraction": gbs(ref_ms) / ceilings["copy_gbs"],
            "compile_copy_fraction": gbs(vs_compile.baseline.median_ms) / ceilings["copy_gbs"],
            "same_size_copy_ms": copy_ms, "fraction_of_same_size_copy": copy_ms / ref_ms,
            "repetitions": [vs_eager.repetitions, vs_compile.repetitions],
        }
        if w.launch_bound:
            row["graph_ms"] = {"baseline": graph_time(baseline.forward, sets_a[0]),
                               "compile": graph_time(compiled, sets_c[0]),
                               "reference": graph_time(reference.forward, sets_b[0])}
        rows.append(row)
        print(f"{task_id:<28} {w.name:<14} ok={verdict.ok} eager {row['baseline_ms']:.4f} compile "
              f"{row['compile_ms']:.4f} ref {ref_ms:.4f} ms  x{row['speedup_vs_eager']:.2f} / "
              f"x{row['speedup_vs_compile']:.2f}  copy BW {row['reference_copy_fraction']:.0%} "
              f"same-size copy {row['fraction_of_same_size_copy']:.0%}", flush=True)
    return rows


def markdown(meta: dict, rows: list[dict]) -> str:
    lines = [
        "# Expert references on the GPU",
        "",
        f"Measured {meta['date']} on {meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, by "
        "`benchmarks/bench_references.py` with the evaluator's timing protocol: CUDA events, L2 flushed "
        "before every call (a write of twice its size, then a read as large: cold cache, no dirty lines), "
        "baseline and candidate interleaved on their own rotating inputs, "
        f"adaptive repetitions (stop at 0.5% standard error or {meta['budget_s']} s), medians; spread = "
        "interquartile range / median; speedup CI = 95% bootstrap interval.",
        f"Ceilings measured in the same run (best of 20 after warm-up): copy {meta['ceilings']['copy_gbs']:.0f} GB/s "
        f"(1 GiB, read + write), streaming read {meta['ceilings']['read_gbs']:.0f} GB/s, bf16 GEMM "
        f"{meta['ceilings']['tflops']:.0f} TFLOP/s. '% copy BW' = bytes moved / time / copy bandwidth. "
        "'roofline' = floor / time, floor = bytes / max(copy, read) bandwidth (read-heavy kernels can beat "
        "a copy). 'vs same-size copy' = time of a device copy moving the workload's bytes / reference time: "
        "smaller kernels cannot reach the 1 GiB copy's bandwidth.",
        "",
        "| task | workload | ok | eager ms | compile ms | reference ms (spread) | vs eager (95% CI) | "
        "vs compile (95% CI) | % copy BW: ref | % copy BW: compile | roofline: ref | ref vs same-size copy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['workload']}{' (launch-bound)' if r['launch_bound'] else ''} | "
            f"{'yes' if r['correct'] else 'NO'} | {r['baseline_ms']:.4f} | {r['compile_ms']:.4f} | "
            f"{r['reference_ms']:.4f} ({r['reference_spread']:.1%}) | {r['speedup_vs_eager']:.2f}x "
            f"({r['speedup_vs_eager_ci'][0]:.2f}-{r['speedup_vs_eager_ci'][1]:.2f}) | "
            f"{r['speedup_vs_compile']:.2f}x ({r['speedup_vs_compile_ci'][0]:.2f}-"
            f"{r['speedup_vs_compile_ci'][1]:.2f}) | {r['reference_copy_fraction']:.0%} | "
            f"{r['compile_copy_fraction']:.0%} | {r['roofline_fraction']:.0%} | {r['fraction_of_same_size_copy']:.0%} |")
    graphs = [r for r in rows if r.get("graph_ms")]
    if graphs:
        lines += ["", "Launch-bound workloads are judged against launch latency, not bytes: their roofline "
                      "floor is far below one kernel launch. Per-call time replayed in a CUDA graph (no launch "
                      "gaps, warm L2):", "",
                  "| task | workload | eager ms | compile ms | reference ms |", "|---|---|---|---|---|"]
        for r in graphs:
            g = r["graph_ms"]
            fmt = lambda v: "-" if v is None else f"{v:.4f}"
            lines.append(f"| {r['task']} | {r['workload']} | {fmt(g['baseline'])} | {fmt(g['compile'])} | "
                         f"{fmt(g['reference'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=None)
    parser.add_argument("--budget-s", type=float, default=3.0)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings,
            "budget_s": args.budget_s}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    rows = []
    for tid in args.tasks or task_ids():
        rows += bench_task(tid, ceilings, flush, args.budget_s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"references-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (out / f"{stem}.md").write_text(markdown(meta, rows))
    print(markdown(meta, rows))


if __name__ == "__main__":
    main()
