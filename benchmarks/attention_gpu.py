"""The attention tasks of issue 27 on one GPU: correctness on every workload and held-out shape, the
honest reference's measured error against its checker's bound, and timings of eager, torch.compile,
the library a user would pick and the reference, with the fraction of roofline, in one run.

    python benchmarks/attention_gpu.py --out benchmarks/results [--tasks gqa_paged_decode ...] [--budget-s 2]

Needs a CUDA GPU, torch (2.5 or later: scaled_dot_product_attention's enable_gqa) and triton; no
other wheel (the libraries compared are torch's own SDPA backends). Timing follows
d2k_env.evaluator.timing (cold L2, interleaved pairs, adaptive repetitions, medians; spread =
interquartile range / median; 95% bootstrap intervals). Ceilings (copy bandwidth, bf16 GEMM peak)
are measured at the start of the same run. Writes attention-<date>.md and .json under --out.

Libraries, per task:
- gqa_paged_decode: SDPA on KV gathered from the pages into a padded [B, Hkv, max_len, d] copy with a
  key mask, the gather included in its time (what a user without a paged kernel must do), and the
  same SDPA call alone on KV gathered beforehand (a bound no paged kernel needs to beat: it reads
  contiguous KV and skips the gather).
- flash_attn_causal_fwd: SDPA(is_causal=True) with the cuDNN backend and with the flash backend
  (neither returns the log-sum-exp; the reference writes it too).
- mla_decode_absorbed: SDPA as multi-query attention over the gathered 576-wide rows (one KV head,
  value = the first 512 columns), gather included; whichever backend SDPA picks for a 576/512 head
  (FlashMLA and FlashInfer are not wheels this machine has).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.timing import L2Flusher, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task
from d2k_env.tasks import RoundingNoise, dtype_step

TASKS = ("gqa_paged_decode", "flash_attn_causal_fwd", "mla_decode_absorbed")
HELDOUT_SEEDS = (1, 2)


def gathered_kv(q, k_buffer, v_buffer, kv_indptr, kv_indices):
    """Each request's K/V rows copied out of the pages into [B, Hkv, max_len, d], and the key mask."""
    lens = kv_indptr[1:] - kv_indptr[:-1]
    longest = int(lens.max())
    pos = torch.arange(longest, device=q.device)
    valid = pos[None, :] < lens[:, None]
    slots = kv_indices[torch.where(valid, kv_indptr[:-1, None] + pos[None, :], 0)].long()
    k = k_buffer[slots].transpose(1, 2)  # [B, Hkv, L, d]
    v = v_buffer[slots].transpose(1, 2)
    return k, v, valid[:, None, None, :]


def sdpa_decode(q, k, v, mask):
    return F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, enable_gqa=True)[:, :, 0]


def sdpa_paged(q, k_buffer, v_buffer, kv_indptr, kv_indices):
    return sdpa_decode(q, *gathered_kv(q, k_buffer, v_buffer, kv_indptr, kv_indices))


def sdpa_mla(q_nope, q_pe, kv_buffer, kv_indptr, kv_indices):
    q = torch.cat([q_nope, q_pe], -1)[:, :, None]  # [B, H, 1, 576]
    rows, _, mask = gathered_kv(q_nope, kv_buffer[:, None], kv_buffer[:, None], kv_indptr, kv_indices)
    out = F.scaled_dot_product_attention(q, rows, rows[..., :q_nope.shape[-1]], attn_mask=mask, scale=192 ** -0.5,
                                         enable_gqa=True)
    return out[:, :, 0]


def sdpa_causal(backend):
    def run(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return run


def libraries(task_id: str, inputs_of):
    """(name, callable, its input sets) per library of the task; ``inputs_of(seed)`` makes inputs."""
    if task_id == "gqa_paged_decode":
        sets = [inputs_of(s) for s in (40, 41, 42)]
        pre = [(x[0], *gathered_kv(*x)) for x in sets]
        return [("SDPA incl. page gather", sdpa_paged, sets), ("SDPA on pre-gathered KV", sdpa_decode, pre)]
    if task_id == "flash_attn_causal_fwd":
        sets = [inputs_of(s) for s in (40, 41, 42)]
        return [("SDPA cuDNN", sdpa_causal(SDPBackend.CUDNN_ATTENTION), sets),
                ("SDPA flash", sdpa_causal(SDPBackend.FLASH_ATTENTION), sets)]
    if task_id == "mla_decode_absorbed":
        return [("SDPA incl. page gather", sdpa_mla, [inputs_of(s) for s in (40, 41, 42)])]
    return []


def noise_excess(task, out: tuple, expected: tuple, inputs: tuple) -> float | None:
    """The reference's largest error beyond one output step, in standard deviations of the rounding
    noise its checker allows (RoundingNoise): the measured margin under the checker's multiple."""
    check = task.spec.check
    if not isinstance(check, RoundingNoise):
        return None
    i = task.outputs.index(check.output)
    o, r = out[i].double(), expected[i].double()
    sigma = check.sigma(inputs).double().expand(r.shape)
    return float((((o - r).abs() - dtype_step(r, out[i].dtype)).clamp(min=0) / sigma).max())


def check_once(task, baseline, reference, inputs) -> dict:
    expected = as_tuple(baseline.forward(*inputs))
    out = as_tuple(reference.forward(*inputs))
    verdict = verdict_for(task, out, expected, inputs)
    return {"ok": verdict.ok, "message": verdict.message, "noise_excess_sigmas": noise_excess(task, out, expected, inputs)}


def bench_task(task_id: str, ceilings: dict, flush: L2Flusher, budget_s: float, compile_too: bool) -> tuple[list, list]:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    compiled = torch.compile(baseline.forward)
    dev = torch.device("cuda")
    rows, held = [], []
    for seed in HELDOUT_SEEDS:
        for w in task.heldout_workloads(seed, smoke=False):
            inputs = task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
            held.append({"task": task_id, "shape": w.name, **check_once(task, baseline, reference, inputs)})
            print(f"{task_id:<24} {w.name:<28} ok={held[-1]['ok']} excess={held[-1]['noise_excess_sigmas']}", flush=True)
            del inputs
            torch.cuda.empty_cache()
    for w in task.workloads:
        def inputs_of(seed, w=w):
            return task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
        row = {"task": task_id, "workload": w.name, **check_once(task, baseline, reference, inputs_of(0))}
        ref_sets, base_sets, warm = [inputs_of(s) for s in (10, 11, 12)], [inputs_of(s) for s in (20, 21, 22)], inputs_of(99)
        vs_eager = time_pair(baseline.forward, reference.forward, base_sets, ref_sets, warm, warm, flush, budget_s)
        row.update(eager_ms=vs_eager.baseline.median_ms, eager_spread=vs_eager.baseline.spread,
                   reference_ms=vs_eager.candidate.median_ms, reference_spread=vs_eager.candidate.spread,
                   speedup_vs_eager=vs_eager.speedup, speedup_vs_eager_ci=vs_eager.speedup_ci)
        if compile_too:
            t0 = time.perf_counter()
            compiled(*warm)
            torch.cuda.synchronize()
            row["compile_s"] = time.perf_counter() - t0
            vs_compile = time_pair(compiled, reference.forward, base_sets, ref_sets, warm, warm, flush, budget_s)
            row.update(compile_ms=vs_compile.baseline.median_ms, compile_spread=vs_compile.baseline.spread,
                       speedup_vs_compile=vs_compile.speedup, speedup_vs_compile_ci=vs_compile.speedup_ci)
        row["libraries"] = {}
        for name, fn, sets in libraries(task_id, inputs_of):
            try:
                pair = time_pair(fn, reference.forward, sets, ref_sets, sets[0], warm, flush, budget_s)
            except RuntimeError as exc:  # a backend that refuses the shape on this machine
                row["libraries"][name] = {"error": str(exc).splitlines()[0][:200]}
                continue
            row["libraries"][name] = {"ms": pair.baseline.median_ms, "spread": pair.baseline.spread,
                                      "reference_vs_library": pair.speedup, "ci": pair.speedup_ci}
        roof = task.roofline(w)
        floor = roof.floor_ms(ceilings["bandwidth_gbs"], ceilings["tflops"])
        row.update(roofline_ms=floor, roofline_fraction=floor / row["reference_ms"],
                   bound="memory" if roof.bytes / ceilings["bandwidth_gbs"] >= roof.flops / ceilings["tflops"] / 1e3
                   else "compute",
                   reference_tflops=roof.flops / row["reference_ms"] / 1e9,
                   reference_gbs=roof.bytes / row["reference_ms"] / 1e6)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del ref_sets, base_sets, warm
        torch.cuda.empty_cache()
    return rows, held


def markdown(meta: dict, rows: list[dict], held: list[dict]) -> str:
    c = meta["ceilings"]
    lines = [
        "# Attention references (issue 27) on the GPU", "",
        f"Measured {meta['date']} on {meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}, by "
        "`benchmarks/attention_gpu.py` (evaluator timing: cold L2, interleaved pairs, adaptive repetitions up to "
        f"{meta['budget_s']} s a pair, medians; spread = IQR / median; 95% bootstrap CI). Ceilings of this run: copy "
        f"{c['copy_gbs']:.0f} GB/s, read {c['read_gbs']:.0f} GB/s, bf16 GEMM {c['tflops']:.0f} TFLOP/s. Roofline = "
        "max(bytes / bandwidth, FLOPs / GEMM peak) / reference time. 'excess' = the reference's largest error beyond "
        "one bf16 step, in standard deviations of the rounding noise the checker allows (it allows 10).", "",
        "| task | workload | ok | excess | eager ms | compile ms | library ms (ref speedup, CI) | reference ms (spread) "
        "| vs eager (CI) | vs compile (CI) | bound | roofline | ref TFLOP/s | ref GB/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        libs = "; ".join(f"{n}: {v['ms']:.3f} ({v['reference_vs_library']:.2f}x, {v['ci'][0]:.2f}-{v['ci'][1]:.2f})"
                         if "ms" in v else f"{n}: {v['error']}" for n, v in r["libraries"].items()) or "-"
        comp = f"{r['compile_ms']:.3f}" if "compile_ms" in r else "-"
        vs_comp = (f"{r['speedup_vs_compile']:.2f}x ({r['speedup_vs_compile_ci'][0]:.2f}-{r['speedup_vs_compile_ci'][1]:.2f})"
                   if "compile_ms" in r else "-")
        excess = "-" if r["noise_excess_sigmas"] is None else f"{r['noise_excess_sigmas']:.2f}"
        lines.append(
            f"| {r['task']} | {r['workload']} | {'yes' if r['ok'] else 'NO: ' + r['message'][:80]} | {excess} | "
            f"{r['eager_ms']:.3f} | {comp} | {libs} | {r['reference_ms']:.3f} ({r['reference_spread']:.1%}) | "
            f"{r['speedup_vs_eager']:.2f}x ({r['speedup_vs_eager_ci'][0]:.2f}-{r['speedup_vs_eager_ci'][1]:.2f}) | "
            f"{vs_comp} | {r['bound']} | {r['roofline_fraction']:.0%} | {r['reference_tflops']:.0f} | "
            f"{r['reference_gbs']:.0f} |")
    lines += ["", "Held-out shapes (correctness only):", "", "| task | shape | ok | excess |", "|---|---|---|---|"]
    for h in held:
        excess = "-" if h["noise_excess_sigmas"] is None else f"{h['noise_excess_sigmas']:.2f}"
        lines.append(f"| {h['task']} | {h['shape']} | {'yes' if h['ok'] else 'NO: ' + h['message'][:80]} | {excess} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile(baseline) (its compile time)")
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings, "budget_s": args.budget_s}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    rows, held = [], []
    for tid in args.tasks:
        r, h = bench_task(tid, ceilings, flush, args.budget_s, not args.no_compile)
        rows += r
        held += h
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"attention-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, "heldout": held}, indent=2))
    (out / f"{stem}.md").write_text(markdown(meta, rows, held))
    print(markdown(meta, rows, held))


if __name__ == "__main__":
    main()
