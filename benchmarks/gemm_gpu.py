"""The quantised-GEMM and LoRA tasks on one GPU: correctness on every workload and held-out shape, then
eager, torch.compile(baseline), the library a user would pick and the reference, timed in the same run.

    python benchmarks/gemm_gpu.py --out benchmarks/results [--tasks w8a8_block_fp8_gemm ...] [--budget-s 1.5]

Timing is the evaluator's protocol (d2k_env.evaluator.timing: L2 flushed before every call, each
pair interleaved on its own rotating inputs, adaptive repetitions, medians; speedup = other / reference,
95% bootstrap interval). Ceilings are measured in the same run: copy bandwidth and the bf16 GEMM peak
(measure_ceilings), and the fp8 e4m3 peak through torch._scaled_mm with per-tensor scales on 8192^3.
The roofline floor of a workload is max(bytes / bandwidth, flops / peak), the peak of the task's tensor
core dtype. For tasks checked with AccumulationBound, "bound used" is the largest error of the
reference as a fraction of the per-element bound (1.0 would fail): the check's margin on this GPU.
Launch-bound workloads also get a CUDA-graph time per call. Writes gemm-<date>.md and .json under --out.
No wheel beyond the project's own is needed: the libraries compared are torch's (cuBLAS through
torch._scaled_mm for the block-fp8 GEMM, torch.matmul on weights dequantised once for AWQ); the LoRA task
has none on that machine, and vLLM's and SGLang's Triton kernels are not compared (their wheels pull
their whole runtimes onto the offline machine).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import random
import time
from pathlib import Path

import torch
import triton

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.timing import L2Flusher, _best_event_time, graph_time, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task, task_ids
from d2k_env.tasks import AccumulationBound
from d2k_env.tasks.checks import dtype_step, is_narrow_float

TASKS = ("w8a8_block_fp8_gemm", "awq_w4a16_gemm", "multi_lora_sgmv")
PEAK = {"w8a8_block_fp8_gemm": "fp8_tflops"}  # others run on the bf16 / fp16 tensor cores


def fp8_peak_tflops(device) -> float:
    m = 8192
    a = torch.randn(m, m, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(m, m, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLAS fp8 wants
    one = torch.ones((), device=device)
    ms = _best_event_time(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16), reps=10)
    return 2 * m**3 / ms / 1e9


# -- the libraries ---------------------------------------------------------------------------------------
# Each maker takes one input set and returns (callable with no arguments, what it is): layout changes a
# user would make once (weights stored in the library's layout) happen here, untimed.

def _scaled_mm_blockwise(a, a_scales, b, b_scales):
    """torch._scaled_mm with 1x128 / 128x128 block scales where this torch takes them (cuBLAS 12.9+ on
    sm_90 wants scale_a [M, K/128] and scale_b [K/128, N/128]; which strides it accepts has changed between
    releases, so each layout is tried and the first whose answer passes the task's check is kept), else
    per-tensor scales (the same fp8 GEMM without the block scaling: a speed upper bound)."""
    task = load_task("w8a8_block_fp8_gemm")
    expected = as_tuple(load_module(str(task.baseline_path), "baseline_w8a8_for_library").forward(a, a_scales, b, b_scales))
    bt = b.t()
    layouts = {"row-major": lambda t: t.contiguous(), "column-major": lambda t: t.t().contiguous().t()}
    for (name_a, lay_a), (name_b, lay_b) in itertools.product(layouts.items(), repeat=2):
        sa, sb = lay_a(a_scales), lay_b(b_scales.t())
        try:
            out = torch._scaled_mm(a, bt, sa, sb, out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
        except (RuntimeError, ValueError):
            continue
        if verdict_for(task, (out,), expected, (a, a_scales, b, b_scales)).ok:
            return ((lambda: torch._scaled_mm(a, bt, sa, sb, out_dtype=torch.bfloat16)),
                    f"torch._scaled_mm, block scales (scale_a {name_a}, scale_b {name_b})", out)
    one = torch.ones((), device=a.device)
    return (lambda: torch._scaled_mm(a, bt, one, one, out_dtype=torch.bfloat16)), \
        "torch._scaled_mm, per-tensor scales (no block-scale layout ran correctly: an upper bound)", None


def _matmul_dequantised_once(x, qweight, qzeros, scales):
    """cuBLAS fp16 (torch.matmul) on the AWQ weights dequantised once, ahead of time: what a user without
    an int4 kernel runs. It reads 4x the weight bytes, so it is the bar for large M and a floor for small."""
    baseline = load_module(str(load_task("awq_w4a16_gemm").baseline_path), "baseline_awq_for_library")
    groups = baseline.GROUP
    w = ((baseline.unpack(qweight) - baseline.unpack(qzeros).repeat_interleave(groups, 0)).to(torch.float16)
         * scales.repeat_interleave(groups, 0)).contiguous()
    return (lambda: torch.matmul(x, w)), "torch.matmul fp16, weights dequantised once", torch.matmul(x, w)


LIBRARIES = {"w8a8_block_fp8_gemm": _scaled_mm_blockwise, "awq_w4a16_gemm": _matmul_dequantised_once}


def library_maker(task_id: str):
    return LIBRARIES.get(task_id)


# -- one task ------------------------------------------------------------------------------------------------

def bound_used(task, out, expected, inputs) -> float | None:
    """Largest |out - expected| / (the AccumulationBound's bound), or None for other checks."""
    check = task.spec.check
    if not isinstance(check, AccumulationBound):
        return None
    i = task.outputs.index(check.output)
    o, r = out[i].double(), expected[i].double()
    bound = check.rel * check.terms(inputs).double().abs()
    if is_narrow_float(out[i].dtype):
        bound = bound + dtype_step(r.abs(), out[i].dtype)
    return float(((o - r).abs() / bound.clamp(min=1e-300)).max())


def bench_task(task_id: str, ceilings: dict, flush: L2Flusher, budget_s: float) -> list[dict]:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    compiled = torch.compile(baseline.forward, dynamic=False)
    dev = torch.device("cuda")
    peak = ceilings[PEAK.get(task_id, "tflops")]
    rows = []
    heldout = task.spec.heldout.draw(random.Random(0), False)
    for n, w in enumerate(list(task.workloads) + heldout):
        timed = n < len(task.workloads)

        def inputs(seed):
            return task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)

        check_in = inputs(0)
        start = time.perf_counter()
        out = as_tuple(reference.forward(*check_in))
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        expected = as_tuple(baseline.forward(*check_in))
        verdict = verdict_for(task, out, expected, check_in)
        row = {"task": task_id, "workload": w.name, "heldout": not timed, "correct": verdict.ok,
               "check": verdict.message, "bound_used": bound_used(task, out, expected, check_in),
               "first_call_s": first_call_s}
        del out, expected
        if timed:
            sets = [inputs(s) for s in (10, 11, 12)]
            warm = inputs(99)
            roof = task.roofline(w).floor_ms(ceilings["bandwidth_gbs"], peak)
            pairs = {"eager": (baseline.forward, sets), "compile": (compiled, sets)}
            make = library_maker(task_id)
            if make is not None:
                libs = [make(*s) for s in sets]
                lib_warm = make(*warm)
                row["library"] = libs[0][1]
                pairs["library"] = (lambda f: f(), [(f,) for f, _, _ in libs])
                lib_out = libs[0][2]
                if lib_out is not None:
                    lib_expected = as_tuple(baseline.forward(*sets[0]))
                    row["library_correct"] = verdict_for(task, (lib_out,), lib_expected, sets[0]).ok
            for name, (fn, other_sets) in pairs.items():
                warm_other = (lib_warm[0],) if name == "library" else warm
                pair = time_pair(fn, reference.forward, other_sets, sets, warm_other, warm, flush, budget_s)
                row[f"{name}_ms"] = pair.baseline.median_ms
                row[f"{name}_spread"] = pair.baseline.spread
                row[f"reference_ms_vs_{name}"] = pair.candidate.median_ms
                row[f"reference_spread_vs_{name}"] = pair.candidate.spread
                row[f"speedup_vs_{name}"] = pair.speedup
                row[f"speedup_vs_{name}_ci"] = pair.speedup_ci
            ref_ms = row["reference_ms_vs_eager"]
            row.update(roofline_ms=roof, roofline_fraction=roof / ref_ms,
                       tflops=task.roofline(w).flops / ref_ms / 1e9,
                       peak_fraction=task.roofline(w).flops / ref_ms / 1e9 / peak)
            if w.launch_bound:  # per call inside a CUDA graph (warm L2, no launch gaps); None: not capturable
                row["graph_ms"] = {"eager": graph_time(baseline.forward, sets[0]),
                                   "compile": graph_time(compiled, sets[0]),
                                   "reference": graph_time(reference.forward, sets[0])}
            del sets, warm
        torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def markdown(meta: dict, rows: list[dict]) -> str:
    c = meta["ceilings"]
    lines = [
        "# Quantised GEMM and LoRA references on the GPU", "",
        f"Measured {meta['date']} on {meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, by "
        "`benchmarks/gemm_gpu.py` (evaluator timing protocol: cold L2, interleaved pairs, medians; "
        "speedup = other / reference with its 95% bootstrap interval).",
        f"Ceilings in the same run: copy {c['copy_gbs']:.0f} GB/s, bf16 GEMM {c['tflops']:.0f} TFLOP/s, fp8 "
        f"e4m3 GEMM (torch._scaled_mm, per-tensor) {c['fp8_tflops']:.0f} TFLOP/s. roofline = floor / time; "
        "peak = the task's tensor-core peak (fp8 for the block-fp8 GEMM, bf16 otherwise).", "",
        "| task | workload | ok | bound used | first call s | eager ms | compile ms | library | library ms | "
        "reference ms (spread) | vs eager | vs compile | vs library | TFLOP/s | % peak | roofline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    fmt = lambda v, s=".4f": "-" if v is None else format(v, s)  # noqa: E731
    for r in rows:
        sp = lambda k: (f"{r[f'speedup_vs_{k}']:.2f}x ({r[f'speedup_vs_{k}_ci'][0]:.2f}-"  # noqa: E731
                        f"{r[f'speedup_vs_{k}_ci'][1]:.2f})") if f"speedup_vs_{k}" in r else "-"
        lines.append(
            f"| {r['task']} | {r['workload']}{' (held-out)' if r['heldout'] else ''} | "
            f"{'yes' if r['correct'] else 'NO: ' + r['check'][:80]} | {fmt(r['bound_used'], '.3f')} | "
            f"{r['first_call_s']:.2f} | {fmt(r.get('eager_ms'))} | {fmt(r.get('compile_ms'))} | "
            f"{r.get('library', '-')}{'' if r.get('library_correct', True) else ' (WRONG answer)'} | "
            f"{fmt(r.get('library_ms'))} | "
            + (f"{r['reference_ms_vs_eager']:.4f} ({r['reference_spread_vs_eager']:.1%})" if 'eager_ms' in r else "-")
            + f" | {sp('eager')} | {sp('compile')} | {sp('library')} | {fmt(r.get('tflops'), '.0f')} | "
              f"{fmt(r.get('peak_fraction'), '.0%')} | {fmt(r.get('roofline_fraction'), '.0%')} |")
    graphs = [r for r in rows if r.get("graph_ms")]
    if graphs:
        lines += ["", "Launch-bound workloads, per call replayed in a CUDA graph (warm L2; '-': not capturable, "
                      "e.g. the eager LoRA loop synchronises on token counts):", "",
                  "| task | workload | eager ms | compile ms | reference ms |", "|---|---|---|---|---|"]
        for r in graphs:
            g = r["graph_ms"]
            lines.append(f"| {r['task']} | {r['workload']} | {fmt(g['eager'])} | {fmt(g['compile'])} | "
                         f"{fmt(g['reference'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=[t for t in TASKS if t in task_ids()])
    parser.add_argument("--budget-s", type=float, default=1.5)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    ceilings["fp8_tflops"] = fp8_peak_tflops(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings,
            "budget_s": args.budget_s}
    print(json.dumps(meta), flush=True)
    flush = L2Flusher(dev)
    rows = []
    for tid in args.tasks:
        rows += bench_task(tid, ceilings, flush, args.budget_s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gemm-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (out / f"{stem}.md").write_text(markdown(meta, rows))
    print(markdown(meta, rows))


if __name__ == "__main__":
    main()
