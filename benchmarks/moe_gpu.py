"""The MoE tasks on one GPU: each reference checked on every workload and on held-out shapes, then
timed against eager, torch.compile(baseline) and the library a user would pick, in one run.

    python benchmarks/moe_gpu.py [--out benchmarks/results] [--tasks moe_grouped_topk_router ...]

Libraries (each import guarded; a missing one is reported as such, never faked):
- moe_grouped_topk_router: SGLang's fused CUDA gate ``sgl_kernel.moe_fused_gate`` (wheel sgl-kernel),
  else vLLM's ``grouped_topk`` (wheel vllm, its Python path with the custom op where the build has it);
- moe_align_block_size: vLLM's CUDA ``vllm._custom_ops.moe_align_block_size`` (wheel vllm);
- fused_moe_bf16: vLLM's ``fused_experts`` (its Triton fused_moe_kernel with its tuned configs; wheel vllm);
- moe_silu_mul_fp8_quant: vLLM's silu_and_mul then per_token_group_quant_fp8 with column-major scales
  (unfused; its bf16 product fails this task's 0.5% code bound, so its check column reads False);
- fused_moe_fp8_blockwise: one dense torch._scaled_mm of the same FLOPs with per-tensor scales, an upper
  bound (cuBLASLt), since torch 2.11 refused block scales; the fp8 peak is measured in the same run.
The roofline fraction uses the bf16 GEMM peak and copy bandwidth measured at the start of the run.
Timing is the evaluator's protocol (d2k_env.evaluator.timing: cold L2, interleaved pairs, adaptive
repetitions, medians, bootstrap intervals); launch-bound workloads also get a CUDA-graph timing. The
first call of each reference (its compile time) is reported. Writes moe-<date>.md and .json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch
import triton

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.timing import L2Flusher, graph_time, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task

TASKS = ("moe_grouped_topk_router", "moe_align_block_size", "fused_moe_bf16", "moe_silu_mul_fp8_quant",
         "fused_moe_fp8_blockwise")
HELDOUT_SEEDS = (0, 1, 2)


def _cloned(inputs):
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _router_library(w):
    try:
        from sgl_kernel import moe_fused_gate

        def run(logits, bias):
            return moe_fused_gate(logits, bias, 8, 4, 8, 0, 2.5)
        return "sgl_kernel.moe_fused_gate", run
    except Exception as exc:  # noqa: BLE001 - any import failure means: not available here
        sgl = repr(exc)
    try:
        from vllm.model_executor.layers.fused_moe.fused_moe import grouped_topk

        def run(logits, bias):
            hidden = torch.empty((logits.shape[0], 1), dtype=torch.bfloat16, device=logits.device)
            return grouped_topk(hidden, logits, 8, True, num_expert_group=8, topk_group=4, scoring_func="sigmoid",
                                routed_scaling_factor=2.5, e_score_correction_bias=bias)
        return "vllm grouped_topk", run
    except Exception as exc:  # noqa: BLE001
        return f"none (sgl_kernel: {sgl}; vllm: {exc!r})", None


def _align_library(w):
    try:
        from vllm import _custom_ops as ops

        def run(topk_ids, num_experts, block_size):
            n = topk_ids.numel() + num_experts * (block_size - 1)
            sorted_ids = torch.empty((n,), dtype=torch.int32, device=topk_ids.device)
            expert_ids = torch.empty((triton.cdiv(n, block_size),), dtype=torch.int32, device=topk_ids.device)
            post = torch.empty((1,), dtype=torch.int32, device=topk_ids.device)
            ops.moe_align_block_size(topk_ids, num_experts, block_size, sorted_ids, expert_ids, post)
            return sorted_ids, expert_ids, post
        return "vllm._custom_ops.moe_align_block_size", run
    except Exception as exc:  # noqa: BLE001
        return f"none (vllm: {exc!r})", None


def _fused_moe_library(w):
    try:
        from vllm.model_executor.layers.fused_moe import fused_experts

        def run(hidden_states, w1, w2, topk_weights, topk_ids):
            return fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, inplace=False)
        return "vllm fused_experts (its Triton fused_moe_kernel)", run
    except Exception as exc:  # noqa: BLE001
        return f"none (vllm: {exc!r})", None


def _silu_quant_library(w):
    try:
        from vllm import _custom_ops as ops
        from vllm.model_executor.layers.quantization.utils.fp8_utils import per_token_group_quant_fp8

        def run(x):
            y = torch.empty((x.shape[0], x.shape[1] // 2), dtype=x.dtype, device=x.device)
            ops.silu_and_mul(y, x)
            q, s = per_token_group_quant_fp8(y, 128, column_major_scales=True)
            return q, s.t()
        return "vllm silu_and_mul + per_token_group_quant_fp8(column_major_scales=True) (unfused, bf16 product)", run
    except Exception as exc:  # noqa: BLE001
        return f"none (vllm: {exc!r})", None


def _fp8_dense_upper_bound(w):
    """Not this task's answer: one dense fp8 GEMM of the same FLOPs ([T*k, K] x [K, N], per-tensor scales,
    torch._scaled_mm / cuBLASLt) as an upper bound on what the tensor cores give these shapes. torch 2.11
    refused 1x128/128x128 block scales in an earlier probe (../shared/MEASURING.md)."""
    dev = torch.device("cuda")
    rows, n, k = w["T"] * w["k"], w["N"], w["K"]
    a = torch.randn(rows, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev)

    def run(*_inputs):
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return "torch._scaled_mm dense, per-tensor scales (upper bound, same FLOPs; not the task's answer)", run


def fp8_tflops(dev, size=8192, reps=20) -> float:
    """The fp8 e4m3 GEMM ceiling now: torch._scaled_mm with per-tensor scales, best of ``reps``."""
    a = torch.randn(size, size, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(size, size, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev)
    for _ in range(3):
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    best = float("inf")
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return 2 * size ** 3 / best / 1e9


LIBRARIES = {"moe_grouped_topk_router": _router_library, "moe_align_block_size": _align_library,
             "fused_moe_bf16": _fused_moe_library, "moe_silu_mul_fp8_quant": _silu_quant_library,
             "fused_moe_fp8_blockwise": _fp8_dense_upper_bound}
FP8_TASKS = ("fused_moe_fp8_blockwise",)  # their roofline uses the fp8 peak


def check_heldout(task, reference, baseline, dev) -> list[dict]:
    rows = []
    for seed in HELDOUT_SEEDS:
        for w in task.heldout_workloads(seed, smoke=False):
            x = task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
            expected = as_tuple(baseline.forward(*_cloned(x)))
            v = verdict_for(task, as_tuple(reference.forward(*x)), expected, x)
            rows.append({"workload": w.name, "seed": seed, "correct": v.ok, "check": v.message})
            print(f"  held-out {w.name:<28} ok={v.ok} {v.message[:100]}", flush=True)
    return rows


def bench_task(task_id: str, ceilings: dict, flush: L2Flusher, budget_s: float) -> dict:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    compiled = torch.compile(baseline.forward, dynamic=False)
    dev = torch.device("cuda")
    rows = []
    for w in task.workloads:
        lib_name, lib = LIBRARIES[task_id](w)
        print(f"{task_id} {w.name}: library {lib_name}", flush=True)
        def inputs(seed):
            return task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
        check_in = inputs(0)
        expected = as_tuple(baseline.forward(*_cloned(check_in)))
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = as_tuple(reference.forward(*check_in))
        torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        verdict = verdict_for(task, out, expected, check_in)
        lib_ok = None
        if lib is not None and task_id not in FP8_TASKS:  # the fp8 upper bound computes another product
            try:  # the library's signature differs between releases: a call that fails drops it, named
                lib_ok = verdict_for(task, tuple(o.to(e.dtype) for o, e in zip(as_tuple(lib(*check_in)), expected)),
                                     expected, check_in).ok
            except Exception as exc:  # noqa: BLE001
                lib_name, lib = f"{lib_name} failed: {exc!r}"[:300], None
        # Each comparison's own sets are made just before it and freed after: fused_moe_bf16's inputs are
        # 2.6 GiB a set on T4096_E8, and thirteen at once (36 GiB) ran an H100 out of memory. The
        # reference's sets are shared by the three comparisons.
        del check_in, expected, out
        sets_b, warm = [inputs(20 + k) for k in range(3)], inputs(99)

        def versus(other, seed):
            if other is None:
                return None, None
            sets = [inputs(seed + k) for k in range(3)]
            pair = time_pair(other, reference.forward, sets, sets_b, warm, warm, flush, budget_s)
            return pair, (graph_time(other, sets[0]) if w.launch_bound else None)

        vs_eager, graph_eager = versus(baseline.forward, 10)
        vs_compile, graph_compile = versus(compiled, 30)
        vs_lib, graph_lib = versus(lib, 40)
        peak = ceilings["fp8_tflops"] if task_id in FP8_TASKS else ceilings["tflops"]
        roof = task.roofline(w).floor_ms(ceilings["bandwidth_gbs"], peak)
        ref_ms = vs_eager.candidate.median_ms
        row = {"workload": w.name, "correct": verdict.ok, "check": verdict.message, "launch_bound": w.launch_bound,
               "first_call_s": first_call_s, "eager_ms": vs_eager.baseline.median_ms,
               "compile_ms": vs_compile.baseline.median_ms, "reference_ms": ref_ms,
               "reference_spread": vs_eager.candidate.spread, "speedup_vs_eager": vs_eager.speedup,
               "speedup_vs_eager_ci": vs_eager.speedup_ci, "speedup_vs_compile": vs_compile.speedup,
               "speedup_vs_compile_ci": vs_compile.speedup_ci, "roofline_ms": roof, "roofline_fraction": roof / ref_ms,
               "library": lib_name, "library_correct": lib_ok,
               "library_ms": vs_lib.baseline.median_ms if vs_lib else None,
               "speedup_vs_library": vs_lib.speedup if vs_lib else None,
               "speedup_vs_library_ci": vs_lib.speedup_ci if vs_lib else None}
        if w.launch_bound:
            row["graph_ms"] = {"eager": graph_eager, "compile": graph_compile,
                               "reference": graph_time(reference.forward, sets_b[0]), "library": graph_lib}
        del sets_b, warm
        torch.cuda.empty_cache()
        rows.append(row)
        print(f"  {w.name:<24} ok={verdict.ok} eager {row['eager_ms']:.4f} compile {row['compile_ms']:.4f} "
              f"lib {row['library_ms'] if vs_lib else float('nan'):.4f} ref {ref_ms:.4f} ms "
              f"(first call {first_call_s:.2f} s) roofline {row['roofline_fraction']:.0%}", flush=True)
    return {"task": task_id, "library": lib_name, "workloads": rows,  # the last workload's library
            "heldout": check_heldout(task, reference, baseline, dev)}


def markdown(meta: dict, results: list[dict]) -> str:
    fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    lines = ["# MoE references on the GPU", "",
             f"Measured {meta['date']} on {meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, by "
             "`benchmarks/moe_gpu.py` (the evaluator's protocol: cold L2, interleaved pairs, medians, 95% bootstrap "
             f"intervals). Ceilings in the same run: copy {meta['ceilings']['copy_gbs']:.0f} GB/s, bf16 GEMM "
             f"{meta['ceilings']['tflops']:.0f} TFLOP/s, fp8 GEMM (torch._scaled_mm, per-tensor) "
             f"{meta['ceilings']['fp8_tflops']:.0f} TFLOP/s (the roofline of the fp8 task).", ""]
    for r in results:
        lines += [f"## {r['task']} (library: {r['library']})", "",
                  "| workload | ok | eager ms | compile ms | library ms (ok) | reference ms (spread) | vs eager | "
                  "vs compile | vs library | roofline | first call s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for w in r["workloads"]:
            lib = "-" if w["library_ms"] is None else f"{w['library_ms']:.4f} ({w['library_correct']})"
            vs_lib = "-" if w["speedup_vs_library"] is None else f"{w['speedup_vs_library']:.2f}x"
            lines.append(f"| {w['workload']}{' (launch-bound)' if w['launch_bound'] else ''} | "
                         f"{'yes' if w['correct'] else 'NO'} | {w['eager_ms']:.4f} | {w['compile_ms']:.4f} | {lib} | "
                         f"{w['reference_ms']:.4f} ({w['reference_spread']:.1%}) | {w['speedup_vs_eager']:.2f}x | "
                         f"{w['speedup_vs_compile']:.2f}x | {vs_lib} | {w['roofline_fraction']:.0%} | "
                         f"{w['first_call_s']:.2f} |")
        for w in r["workloads"]:
            if w.get("graph_ms"):
                g = w["graph_ms"]
                lines.append(f"\nCUDA graph, {w['workload']}: eager {fmt(g['eager'])}, compile {fmt(g['compile'])}, "
                             f"library {fmt(g['library'])}, reference {fmt(g['reference'])} ms per call")
        bad = [h for h in r["heldout"] if not h["correct"]]
        lines += ["", f"Held-out shapes (seeds {HELDOUT_SEEDS}): {len(r['heldout']) - len(bad)} of "
                      f"{len(r['heldout'])} correct" + "".join(f"; {h['workload']}: {h['check']}" for h in bad), ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--budget-s", type=float, default=2.0)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    ceilings["fp8_tflops"] = fp8_tflops(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    results = [bench_task(t, ceilings, flush, args.budget_s) for t in args.tasks]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"moe-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / f"{stem}.md").write_text(markdown(meta, results))
    print(markdown(meta, results))


if __name__ == "__main__":
    main()
