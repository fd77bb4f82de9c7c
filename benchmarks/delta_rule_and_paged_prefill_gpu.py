"""The gated delta-rule tasks and unified paged prefill on one GPU: correctness on every workload and
held-out shape, and, in one run, eager baseline, torch.compile(baseline), the library a user would
pick and the reference, with the roofline fraction against ceilings measured in the same run.

    python benchmarks/delta_rule_and_paged_prefill_gpu.py [--out benchmarks/results] [--budget-s 2] [--tasks ...]

flash-linear-attention comes from the wheels fla-core==0.5.2 and einops==0.8.2 (no network on the GPU
machine: ../shared/gpu/prepare-wheels.sh fla-core==0.5.2 einops==0.8.2); without them its column says
why. What fla is called with, per task:
- gdn_recurrent_decode: fla's fused_recurrent_gated_delta_rule (q/k L2 norm in the kernel, GVA) has no
  state-pool indices, so its time includes gathering the batch's states from the pool and scattering
  the final ones back (two torch indexing ops): what a user of fla would have to add.
- gdn_chunk_fwd: fla's two kernels after the WY terms, chunk_gated_delta_rule_fwd_h then chunk_fwd_o,
  on the same w, u and chunk-local gates (scaled to fla 0.5's log2 domain); its varlen chunk tables
  and the scaled gates are built once per input set outside the timing (fla builds the tables on the
  host from cu_seqlens, and scales the gates inside its cumsum kernel).
- unified_paged_prefill: torch's scaled_dot_product_attention in bf16 (torch picks the backend:
  flash or cuDNN for these shapes), per sequence after gathering its pages into contiguous K/V and
  expanding the KV heads to the query heads, with a lower-right causal mask
  (torch.nn.attention.bias.causal_lower_right) for the context offset; one call per sequence.
Timing is the evaluator's protocol (d2k_env.evaluator.timing: cold L2, interleaved pairs, adaptive
repetitions, medians, bootstrap intervals). Correctness uses the task's own checker on the outputs and
the in-place-updated inputs (d2k_env.tasks.in_place), each side on its own copy of the inputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
from pathlib import Path

import torch
import triton

from d2k_env.evaluator.checking import as_tuple
from d2k_env.evaluator.timing import L2Flusher, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task
from d2k_env.tasks import checked_values

DEVICE = torch.device("cuda")
TASKS = ("gdn_recurrent_decode", "gdn_chunk_fwd", "unified_paged_prefill")
HELDOUT_SEEDS = (0, 1)


def fla_recurrent():
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    def run(q, k, v, g, beta, state, state_indices):
        idx = state_indices.long()
        o, final = fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, scale=q.shape[-1] ** -0.5,
                                                    initial_state=state[idx], output_final_state=True,
                                                    use_qk_l2norm_in_kernel=True)
        state[idx] = final
        return o
    return run


def fla_chunk():
    from fla.ops.common.chunk_delta_h import chunk_gated_delta_rule_fwd_h
    from fla.ops.common.chunk_o import chunk_fwd_o
    from fla.ops.utils import prepare_chunk_indices
    tables = {}

    def run(q, k, w, u, g, initial_state, cu_seqlens):
        key = (cu_seqlens.data_ptr(), g.data_ptr())
        if key not in tables:  # built once per input set, outside the timed calls: the host-side chunk
            # tables, and the gates in fla 0.5's log2 domain (its own cumsum kernel scales them in passing)
            tables[key] = (cu_seqlens.long(), cu_seqlens.cpu().long(), prepare_chunk_indices(cu_seqlens.long(), 64),
                           (g * 1.4426950408889634)[None])
        cu, cu_cpu, chunks, g2 = tables[key]
        h, v_new, final = chunk_gated_delta_rule_fwd_h(k[None], w[None], u[None], g=g2, initial_state=initial_state,
                                                       output_final_state=True, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu,
                                                       chunk_indices=chunks)
        o = chunk_fwd_o(q[None], k[None], v_new, h, g=g2, scale=q.shape[-1] ** -0.5, cu_seqlens=cu,
                        chunk_indices=chunks)
        return o[0], final
    return run


def sdpa_paged():
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right
    tables = {}

    def run(q, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens):
        key = cu_seqlens_q.data_ptr()
        if key not in tables:  # the lengths on the host, once per input set (outside the timed calls)
            tables[key] = (cu_seqlens_q.tolist(), seq_lens.tolist())
        starts, lens = tables[key]
        _, page, Hkv, d = k_cache.shape
        group = q.shape[1] // Hkv
        out = torch.empty_like(q)
        for i, seq_len in enumerate(lens):
            q_start, q_end = starts[i], starts[i + 1]
            pages = block_table[i, : (seq_len + page - 1) // page].long()
            k = k_cache[pages].reshape(-1, Hkv, d)[:seq_len].transpose(0, 1).repeat_interleave(group, 0)
            v = v_cache[pages].reshape(-1, Hkv, d)[:seq_len].transpose(0, 1).repeat_interleave(group, 0)
            qi = q[q_start:q_end].transpose(0, 1)[None]
            mask = None if q_end - q_start == 1 else causal_lower_right(q_end - q_start, seq_len)
            out[q_start:q_end] = F.scaled_dot_product_attention(qi, k[None], v[None], attn_mask=mask)[0].transpose(0, 1)
        return out
    return run


LIBRARIES = {"gdn_recurrent_decode": fla_recurrent, "gdn_chunk_fwd": fla_chunk, "unified_paged_prefill": sdpa_paged}


def compiled_baseline(task_id, path):
    """torch.compile of the baseline, from a copy of its module. A baseline that loops over chunks or
    sequences in Python (bounds read from cu_seqlens) gets its per-chunk or per-sequence function
    compiled instead (dynamic shapes): compiling the loop would unroll it and recompile for every
    length mix."""
    module = load_module(path, f"compiled_{task_id}")
    for step in ("chunk_step", "attend"):  # the per-chunk / per-sequence function the loop calls
        if hasattr(module, step):
            setattr(module, step, torch.compile(getattr(module, step), dynamic=True))
            return module.forward
    return torch.compile(module.forward, dynamic=False)


def verdict(task, fn, baseline, w, seed=0):
    """The task's checker on fn's outputs and updated inputs, against the baseline's, each on a copy."""
    dev = DEVICE
    inputs = task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
    mine, theirs = (tuple(x.clone() for x in inputs) for _ in range(2))
    expected = checked_values(task.spec, as_tuple(baseline(*theirs)), theirs)
    got = checked_values(task.spec, as_tuple(fn(*mine)), mine)
    names = [o.name for o in task.spec.checked_outputs]
    return task.spec.check.verdict(dict(zip(names, got)), dict(zip(names, expected)), inputs)


def bench_task(task_id, ceilings, flush, budget_s):
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}").forward
    reference = load_module(str(task.reference_path), f"reference_{task_id}").forward
    compiled = compiled_baseline(task_id, str(task.baseline_path))
    try:
        library, library_error = LIBRARIES[task_id](), None
    except Exception as exc:  # noqa: BLE001  (reported in the table)
        library, library_error = None, f"{type(exc).__name__}: {exc}"
    dev = DEVICE
    rows = []
    heldout = [h for s in HELDOUT_SEEDS for h in task.heldout_workloads(s, smoke=False)]
    for w in heldout:
        v = verdict(task, reference, baseline, w)
        rows.append({"task": task_id, "workload": w.name, "heldout": True, "correct": v.ok, "check": v.message,
                     "max_rel_err": v.max_rel_err})
        print(f"{task_id} {w.name}: ok={v.ok} {v.message} rel {v.max_rel_err:.3g}", flush=True)
    for w in task.workloads:
        v = verdict(task, reference, baseline, w)
        row = {"task": task_id, "workload": w.name, "heldout": False, "correct": v.ok, "check": v.message,
               "max_rel_err": v.max_rel_err}
        sets = lambda base: [task.make_inputs(w, torch.Generator(dev).manual_seed(base + i), dev) for i in range(3)]  # noqa
        warm = task.make_inputs(w, torch.Generator(dev).manual_seed(99), dev)
        ref_sets = sets(20)
        eager = time_pair(baseline, reference, sets(10), ref_sets, warm, warm, flush, budget_s)
        comp = time_pair(compiled, reference, sets(30), ref_sets, warm, warm, flush, budget_s)
        roof = task.roofline(w)
        floor_ms = roof.floor_ms(ceilings["bandwidth_gbs"], ceilings["tflops"])
        ref_ms = eager.candidate.median_ms
        row.update({
            "eager_ms": eager.baseline.median_ms, "compile_ms": comp.baseline.median_ms,
            "reference_ms": ref_ms, "reference_spread": eager.candidate.spread,
            "speedup_vs_eager": eager.speedup, "speedup_vs_eager_ci": eager.speedup_ci,
            "speedup_vs_compile": comp.speedup, "speedup_vs_compile_ci": comp.speedup_ci,
            "roofline_ms": floor_ms, "roofline_fraction": floor_ms / ref_ms,
            "bytes": roof.bytes, "flops": roof.flops,
            "achieved_gbs": roof.bytes / ref_ms / 1e6, "achieved_tflops": roof.flops / ref_ms / 1e9,
        })
        if library is not None:
            try:
                lv = verdict(task, library, baseline, w)
                lib = time_pair(library, reference, sets(40), ref_sets, warm, warm, flush, budget_s)
                row.update({"library_ok": lv.ok, "library_check": lv.message, "library_ms": lib.baseline.median_ms,
                            "library_spread": lib.baseline.spread, "reference_vs_library": lib.speedup,
                            "reference_vs_library_ci": lib.speedup_ci})
            except Exception as exc:  # noqa: BLE001
                row["library_error"] = f"{type(exc).__name__}: {exc}"[:300]
        else:
            row["library_error"] = library_error
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def markdown(meta, rows):
    c = meta["ceilings"]
    lines = [f"# Gated delta-rule tasks and unified paged prefill on the GPU ({meta['gpu']})", "",
             f"{meta['date']}, torch {meta['torch']}, triton {meta['triton']}, fla {meta['fla']}; by "
             "`benchmarks/delta_rule_and_paged_prefill_gpu.py` (evaluator timing protocol: cold L2, interleaved pairs, medians, "
             "95% bootstrap intervals). Ceilings measured in this run: copy "
             f"{c['copy_gbs']:.0f} GB/s, read {c['read_gbs']:.0f} GB/s, bf16 GEMM {c['tflops']:.0f} TFLOP/s. "
             "roofline = max(bytes / bandwidth, flops / bf16 peak) / reference time. fla recurrent: includes "
             "gathering and scattering the pool's states (fla has no state indices). Library of unified_paged_prefill: "
             "bf16 scaled_dot_product_attention per sequence on its gathered pages, KV heads expanded. compile of "
             "gdn_chunk_fwd and unified_paged_prefill: the per-chunk / per-sequence function compiled (dynamic "
             "shapes), the loop left in Python.", "",
             "| task | workload | ok | eager ms | compile ms | library ms | reference ms (spread) | vs eager (CI) | "
             "vs compile (CI) | vs fla (CI) | GB/s | TFLOP/s | roofline |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["heldout"]:
            continue
        ci = lambda k: f"{r[k][0]:.2f}-{r[k][1]:.2f}"  # noqa: E731
        lib = (f"{r['library_ms']:.4f}" + ("" if r["library_ok"] else " (WRONG)")) if "library_ms" in r else \
            f"- ({r.get('library_error', '')[:60]})"
        vs_lib = f"{r['reference_vs_library']:.2f}x ({ci('reference_vs_library_ci')})" if "library_ms" in r else "-"
        lines.append(f"| {r['task']} | {r['workload']} | {'yes' if r['correct'] else 'NO'} | {r['eager_ms']:.4f} | "
                     f"{r['compile_ms']:.4f} | {lib} | {r['reference_ms']:.4f} ({r['reference_spread']:.1%}) | "
                     f"{r['speedup_vs_eager']:.2f}x ({ci('speedup_vs_eager_ci')}) | {r['speedup_vs_compile']:.2f}x "
                     f"({ci('speedup_vs_compile_ci')}) | {vs_lib} | {r['achieved_gbs']:.0f} | "
                     f"{r['achieved_tflops']:.1f} | {r['roofline_fraction']:.0%} |")
    lines += ["", "Held-out shapes (checked, untimed): " + "; ".join(
        f"{r['task']} {r['workload']} {'ok' if r['correct'] else 'WRONG: ' + r['check']} (rel {r['max_rel_err']:.2g})"
        for r in rows if r["heldout"])]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    args = parser.parse_args()
    dev = DEVICE
    try:
        import fla
        fla_version = fla.__version__
    except ImportError:
        fla_version = "not installed"
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "fla": fla_version, "ceilings": ceilings}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    random.seed(0)
    rows = [r for t in args.tasks for r in bench_task(t, ceilings, flush, args.budget_s)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"delta-rule-and-paged-prefill-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (out / f"{stem}.md").write_text(markdown(meta, rows))
    print(markdown(meta, rows))


if __name__ == "__main__":
    main()
