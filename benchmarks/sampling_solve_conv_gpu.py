"""References of issue 29's sampling, triangular-solve and short-convolution tasks on one GPU: correctness on every workload
and held-out shape, and times of eager, torch.compile(baseline), the library a user would pick, and the
reference.

    python benchmarks/sampling_solve_conv_gpu.py [--tasks topk_topp_mask ...] [--out benchmarks/results] [--budget-s 2]

The eager / compile / reference columns and the ceilings come from benchmarks/bench_references.py
(the evaluator's timing protocol: cold L2, interleaved pairs, adaptive repetitions, medians). The
library is timed the same way against the reference (``time_pair``), where its wheel is installed:
- topk_topp_mask: vLLM's ``apply_top_k_top_p`` (wheel ``vllm``; its Triton path where vLLM picks it,
  else its sort-based fallback). vLLM splits a tie group at the top-p cut in sort order; its
  output is checked with the task's checker and the verdict printed, not required.
- spec_rejection_sample: none. vLLM's ``rejection_sample`` draws its own noise from the request
  generators of a ``SamplingMetadata`` (its outputs cannot be compared) and its kernels' signatures
  change between releases; the vLLM-style port in tests/security/honest_corpus/ is its stand-in.
- wy_tril_inverse: flash-linear-attention's chunk_scaled_dot_kkt_fwd then solve_tril (wheel
  ``flash-linear-attention``, with its ``fla`` package); torch.linalg.solve_triangular is the eager
  baseline's own solve (the eager column).
- causal_conv1d_varlen: vLLM's Triton ``causal_conv1d_fn`` (wheel ``vllm``), called on the channel-first
  view it expects, its cache updated in place on a copy. The causal-conv1d package's CUDA kernel takes
  a padded batch with ``seq_idx``, not this layout.
Held-out shapes: the GPU family's draws for seeds 0 and 1, each checked against the baseline.
Writes sampling-solve-conv-<date>.md and .json under --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_references import bench_task, markdown  # noqa: E402

from d2k_env.evaluator.checking import as_tuple, verdict_for  # noqa: E402
from d2k_env.evaluator.timing import L2Flusher, measure_ceilings, time_pair  # noqa: E402
from d2k_env.evaluator.worker import load_module  # noqa: E402
from d2k_env.task import load_task  # noqa: E402

TASKS = ["topk_topp_mask", "spec_rejection_sample", "wy_tril_inverse", "causal_conv1d_varlen"]


def library(task_id: str):
    """(name, forward) of what a user would call instead, or (reason it is missing, None)."""
    if task_id == "topk_topp_mask":
        try:
            from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p
        except Exception as exc:  # noqa: BLE001 - any import failure: the wheel is absent or broken here
            return f"vllm not importable ({type(exc).__name__}: {exc})", None
        return "vllm apply_top_k_top_p", lambda logits, k, p: apply_top_k_top_p(logits.clone(), k.long(), p)
    if task_id == "wy_tril_inverse":
        try:
            from fla.ops.common.chunk_scaled_dot_kkt import chunk_scaled_dot_kkt_fwd
            from fla.ops.utils.solve_tril import solve_tril
        except Exception as exc:  # noqa: BLE001 - the wheel is absent or broken here
            return f"fla not importable ({type(exc).__name__}: {exc})", None

        def fla_inverse(k, beta, g, cu_seqlens):
            try:  # the gate's keyword was g_cumsum before fla 0.3, g after
                A = chunk_scaled_dot_kkt_fwd(k=k, beta=beta, g=g, cu_seqlens=cu_seqlens, output_dtype=torch.float32)
            except TypeError:
                A = chunk_scaled_dot_kkt_fwd(k=k, beta=beta, g_cumsum=g, cu_seqlens=cu_seqlens,
                                             output_dtype=torch.float32)
            return solve_tril(A, cu_seqlens=cu_seqlens, output_dtype=torch.float32)
        return "fla chunk_scaled_dot_kkt_fwd + solve_tril", fla_inverse
    if task_id == "causal_conv1d_varlen":
        try:
            from vllm.model_executor.layers.mamba.ops.causal_conv1d import causal_conv1d_fn
        except Exception as exc:  # noqa: BLE001 - the wheel is absent or broken here
            return f"vllm not importable ({type(exc).__name__}: {exc})", None

        def vllm_conv(x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state):
            states = conv_states.clone()
            out = causal_conv1d_fn(x.T, weight, bias, conv_states=states, query_start_loc=query_start_loc,
                                   cache_indices=cache_indices, has_initial_state=has_initial_state,
                                   activation="silu", pad_slot_id=-1)
            return out.T.contiguous(), states
        return "vllm causal_conv1d_fn", vllm_conv
    if task_id == "spec_rejection_sample":
        return "none: vLLM's rejection_sample draws its own noise (see the module docstring)", None
    return "no library named for this task", None


def check_heldout(task_id: str) -> list[dict]:
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}_h")
    reference = load_module(str(task.reference_path), f"reference_{task_id}_h")
    dev = torch.device("cuda")
    rows = []
    for seed in (0, 1):
        for w in task.spec.heldout.draw(random.Random(seed), False):
            inputs = task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
            expected = as_tuple(baseline.forward(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
            verdict = verdict_for(task, as_tuple(reference.forward(*inputs)), expected, inputs)
            rows.append({"task": task_id, "heldout": w.name, "correct": verdict.ok, "check": verdict.message})
            print(f"{task_id:<24} held-out {w.name:<28} ok={verdict.ok} {verdict.message[:120]}", flush=True)
    return rows


def bench_library(task_id: str, flush: L2Flusher, budget_s: float) -> list[dict]:
    name, fn = library(task_id)
    print(f"{task_id}: library: {name}", flush=True)
    if fn is None:
        return [{"task": task_id, "library": name}]
    task = load_task(task_id)
    reference = load_module(str(task.reference_path), f"reference_{task_id}_l")
    dev = torch.device("cuda")
    rows = []
    for w in task.workloads:
        def inputs(seed):
            return task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
        check_in = inputs(0)
        try:
            got = as_tuple(fn(*check_in))
        except Exception as exc:  # noqa: BLE001 - a library release whose signature differs: say so, go on
            print(f"{task_id:<24} {w.name:<24} {name} failed: {type(exc).__name__}: {exc}", flush=True)
            rows.append({"task": task_id, "library": f"{name} failed: {type(exc).__name__}: {str(exc)[:120]}"})
            break
        verdict = verdict_for(task, got, as_tuple(reference.forward(*check_in)), check_in)
        sets_a, sets_b = [inputs(10 + i) for i in range(3)], [inputs(20 + i) for i in range(3)]
        pair = time_pair(fn, reference.forward, sets_a, sets_b, inputs(99), inputs(99), flush, budget_s)
        row = {"task": task_id, "workload": w.name, "library": name, "library_passes_check": verdict.ok,
               "library_check": verdict.message, "library_ms": pair.baseline.median_ms,
               "library_spread": pair.baseline.spread, "reference_ms": pair.candidate.median_ms,
               "reference_vs_library": pair.speedup, "reference_vs_library_ci": pair.speedup_ci}
        rows.append(row)
        print(f"{task_id:<24} {w.name:<24} {name}: {row['library_ms']:.4f} ms (passes check: {verdict.ok}) "
              f"ref {row['reference_ms']:.4f} ms  x{pair.speedup:.2f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--budget-s", type=float, default=2.0)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings,
            "budget_s": args.budget_s}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    rows, heldout, libs = [], [], []
    for tid in args.tasks:
        heldout += check_heldout(tid)
        rows += bench_task(tid, ceilings, flush, args.budget_s)
        libs += bench_library(tid, flush, args.budget_s)
    text = markdown(meta, rows) + "\n## Held-out shapes\n\n| task | shape | ok | check |\n|---|---|---|---|\n" + "".join(
        f"| {r['task']} | {r['heldout']} | {'yes' if r['correct'] else 'NO'} | {r['check'][:100]} |\n" for r in heldout)
    text += "\n## Library\n\n| task | workload | library | its output passes the check | library ms (spread) | " \
            "reference ms | reference vs library (95% CI) |\n|---|---|---|---|---|---|---|\n"
    for r in libs:
        if "library_ms" not in r:
            text += f"| {r['task']} | - | {r['library']} | - | - | - | - |\n"
            continue
        lo, hi = r["reference_vs_library_ci"]
        text += (f"| {r['task']} | {r['workload']} | {r['library']} | {'yes' if r['library_passes_check'] else 'no'} | "
                 f"{r['library_ms']:.4f} ({r['library_spread']:.1%}) | {r['reference_ms']:.4f} | "
                 f"{r['reference_vs_library']:.2f}x ({lo:.2f}-{hi:.2f}) |\n")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"sampling-solve-conv-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, "heldout": heldout, "library": libs},
                                                 indent=2))
    (out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
