"""fused_linear_cross_entropy on one GPU (issue 29). One command checks the reference on every workload
and on held-out shapes, times in the same run, by the evaluator's protocol (cold L2, interleaved pairs,
adaptive repetitions, medians), eager baseline, torch.compile(baseline), the reference and Liger-Kernel's
fused linear cross-entropy, with the roofline fraction against ceilings measured in the same run, and
measures each one's peak device memory for one call (the bytes above what was allocated before it),
beside the task's allocation limit.

    python benchmarks/flce_gpu.py --out benchmarks/results [--heldout-seeds 2] [--budget-s 2]

Liger-Kernel is optional (a row says "not installed" when its import fails); its pure-Python wheel:
`../shared/gpu/prepare-wheels.sh liger-kernel==0.8.5`. It is called as a user calls it, through
liger_kernel.transformers.functional.liger_fused_linear_cross_entropy and autograd (Liger computes both
gradients in its forward and reads the token count back with .item(); its grad_W is bf16, as the weight).
Writes flce-<date>.md and .json under --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_references import bench_task  # noqa: E402  (the shared eager/compile/reference timing)
from norm_fusion_gpu import heldout_rows  # noqa: E402  (reference vs baseline on held-out shapes)

from d2k_env.evaluator.timing import L2Flusher, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task

TASK = "fused_linear_cross_entropy"
GIB = 2 ** 30


def liger_flce(inputs_list):
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    leaves = [(h.detach().clone().requires_grad_(), w.detach().clone().requires_grad_(), t)
              for h, w, t in inputs_list]

    def run(i):
        h, w, t = leaves[i]
        loss = liger_fused_linear_cross_entropy(h, w, t, ignore_index=-100, reduction="mean")
        return (loss,) + torch.autograd.grad(loss, (h, w))
    return run


def peak_gib(fn, *args) -> float:
    """Peak device memory of one call above what was allocated before it, in GiB."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = fn(*args)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    del out
    return peak / GIB


def library_and_memory_rows(flush: L2Flusher, budget_s: float) -> list[dict]:
    """Per workload: Liger against the reference, interleaved, and every method's peak memory."""
    task = load_task(TASK)
    baseline = load_module(str(task.baseline_path), f"baseline_{TASK}")
    reference = load_module(str(task.reference_path), f"reference_{TASK}")
    compiled = torch.compile(baseline.forward, dynamic=False)
    dev = torch.device("cuda")
    rows = []
    for w in task.workloads:
        sets = [task.make_inputs(w, torch.Generator(dev).manual_seed(40 + k), dev) for k in range(4)]
        row = {"workload": w.name, "limit_gib": task.spec.allocation_limit(w) / GIB,
               "eager_peak_gib": peak_gib(baseline.forward, *sets[0]),
               "compile_peak_gib": peak_gib(compiled, *sets[0]),
               "reference_peak_gib": peak_gib(reference.forward, *sets[0])}
        try:
            lib = liger_flce(sets)
            row["library_peak_gib"] = peak_gib(lib, 0)
            pair = time_pair(lib, reference.forward, [(k,) for k in range(3)], sets[:3], (3,), sets[3], flush,
                             budget_s)
            row.update(library_ms=pair.baseline.median_ms, library_spread=pair.baseline.spread,
                       reference_ms=pair.candidate.median_ms, reference_vs_library=pair.speedup,
                       reference_vs_library_ci=pair.speedup_ci)
            print(f"{w.name:<20} Liger {pair.baseline.median_ms:.3f} ms, reference {pair.candidate.median_ms:.3f} ms, "
                  f"x{pair.speedup:.2f}", flush=True)
        except ImportError as exc:
            row["library_error"] = f"not installed: {exc}"
        except Exception as exc:  # another release's API: say so in the table, go on
            row["library_error"] = f"{type(exc).__name__}: {exc}"[:200]
        print({k: v for k, v in row.items() if "peak" in k or "limit" in k}, flush=True)
        rows.append(row)
        del sets
        torch.cuda.empty_cache()
    return rows


def markdown(meta: dict, rows: list[dict], libs: list[dict], held: list[dict]) -> str:
    lines = [f"# fused_linear_cross_entropy on the GPU ({meta['date']})", "",
             f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}; ceilings measured in this run: copy "
             f"{meta['ceilings']['copy_gbs']:.0f} GB/s, bf16 GEMM {meta['ceilings']['tflops']:.0f} TFLOP/s. Timing: "
             "the evaluator's protocol (cold L2, interleaved pairs, adaptive repetitions, medians; spread = IQR / "
             "median; 95% bootstrap CI).", "",
             "| workload | ok | eager ms | compile ms | reference ms (spread) | vs eager | vs compile | roofline |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {'yes' if r['correct'] else 'NO'} | {r['baseline_ms']:.3f} | "
                     f"{r['compile_ms']:.3f} | {r['reference_ms']:.3f} ({r['reference_spread']:.1%}) | "
                     f"{r['speedup_vs_eager']:.2f}x | {r['speedup_vs_compile']:.2f}x "
                     f"({r['speedup_vs_compile_ci'][0]:.2f}-{r['speedup_vs_compile_ci'][1]:.2f}) | "
                     f"{r['roofline_fraction']:.0%} |")
    lines += ["", "Peak device memory of one call (GiB above what was allocated before it; the task's limit is on the "
              "bytes a solution allocates, outputs included).", "",
              "| workload | limit | eager | compile | reference | Liger | Liger ms (spread) | reference ms | "
              "reference vs Liger (95% CI) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in libs:
        lib = (f"{r['library_peak_gib']:.2f} | {r['library_ms']:.3f} ({r['library_spread']:.1%}) | "
               f"{r['reference_ms']:.3f} | {r['reference_vs_library']:.2f}x ({r['reference_vs_library_ci'][0]:.2f}-"
               f"{r['reference_vs_library_ci'][1]:.2f})" if "library_error" not in r
               else f"- | {r['library_error']} | - | -")
        lines.append(f"| {r['workload']} | {r['limit_gib']:.2f} | {r['eager_peak_gib']:.2f} | "
                     f"{r['compile_peak_gib']:.2f} | {r['reference_peak_gib']:.2f} | {lib} |")
    lines += ["", "| seed | held-out shape | ok | max rel err | message |", "|---|---|---|---|---|"]
    for r in held:
        lines.append(f"| {r['seed']} | {r['shape']} | {'yes' if r['correct'] else 'NO'} | {r['max_rel_err']:.3g} | "
                     f"{r['message'][:120]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--heldout-seeds", type=int, default=2)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings, "budget_s": args.budget_s}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    held = heldout_rows(TASK, args.heldout_seeds)
    rows = bench_task(TASK, ceilings, flush, args.budget_s)
    torch.cuda.empty_cache()
    libs = library_and_memory_rows(flush, args.budget_s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"flce-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, "libraries": libs, "heldout": held},
                                                 indent=2, default=str))
    (out / f"{stem}.md").write_text(markdown(meta, rows, libs, held))
    print(markdown(meta, rows, libs, held))


if __name__ == "__main__":
    main()
