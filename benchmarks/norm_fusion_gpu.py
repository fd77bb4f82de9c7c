"""The backward/fusion/optimizer family on one GPU (issue 29): rmsnorm_bwd, swiglu_fwd_bwd,
newton_schulz5_muon, rope_qk_inplace. One command checks each reference on every workload and on held-out shapes,
and times, in the same run and by the evaluator's protocol (cold L2, interleaved, adaptive
repetitions, medians): eager baseline, torch.compile(baseline), the reference, and the library a
user would pick instead, with roofline fractions against ceilings measured in the same run.

    python benchmarks/norm_fusion_gpu.py --out benchmarks/results [--tasks ...] [--heldout-seeds 3]

Libraries, each optional (a row says "not installed" when its import fails):
- Liger-Kernel (pure-Python wheel: `../shared/gpu/prepare-wheels.sh liger-kernel==0.8.5`): its
  RMSNorm backward (through its autograd function, backward only, the forward's graph kept) and its
  SwiGLU forward + backward (LigerSiLUMulFunction; its ensure_contiguous copies the packed views,
  as a user's call would), and its RoPE (liger_rotary_pos_emb on q and k viewed as [1, heads, T, d],
  rotated in place as its kernel does; the cos/sin rows it needs gathered from the cache by position
  and duplicated to full width inside the timed call, as a user feeding it from vLLM's cache must).
- cuBLAS through torch for Newton-Schulz: the same five steps with the linear combinations folded
  into torch.baddbmm's alpha/beta (cuBLAS epilogues), the best a user gets without a custom kernel.
Writes norm-fusion-<date>.md and .json under --out.
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
from bench_references import bench_task  # noqa: E402  (the shared eager/compile/reference timing)

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.timing import L2Flusher, measure_ceilings, time_pair
from d2k_env.evaluator.worker import load_module
from d2k_env.task import load_task

TASKS = ("rmsnorm_bwd", "swiglu_fwd_bwd", "newton_schulz5_muon", "rope_qk_inplace")


def liger_rmsnorm_backward(inputs_list):
    """Per input set, Liger's RMSNorm forward graph built once; the callable runs its backward."""
    from liger_kernel.transformers.rms_norm import LigerRMSNorm
    graphs = []
    for dy, x, weight, _ in inputs_list:
        norm = LigerRMSNorm(x.shape[1], eps=1e-6, offset=0.0, casting_mode="llama", in_place=False).to(x.device)
        norm.weight.data.copy_(weight)
        x_leaf = x.detach().clone().requires_grad_()
        graphs.append((norm(x_leaf), x_leaf, norm.weight, dy))

    def backward(i):
        y, x_leaf, w, dy = graphs[i]
        return torch.autograd.grad(y, (x_leaf, w), dy, retain_graph=True)
    return backward


def liger_swiglu(inputs_list):
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    leaves = [(a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_(), dc)
              for a, b, dc in inputs_list]

    def fwd_bwd(i):
        a, b, dc = leaves[i]
        c = LigerSiLUMulFunction.apply(a, b)
        return (c,) + torch.autograd.grad(c, (a, b), dc)
    return fwd_bwd


def cublas_newton_schulz(inputs_list):
    coef_a, coef_b, coef_c = 3.4445, -4.7750, 2.0315

    def run(i):
        (g,) = inputs_list[i]
        x = g.mT if g.size(-2) > g.size(-1) else g
        x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
        for _ in range(5):
            gram = torch.bmm(x, x.mT)
            poly = torch.baddbmm(gram, gram, gram, beta=coef_b, alpha=coef_c)
            x = torch.baddbmm(x, poly, x, beta=coef_a, alpha=1.0)
        return x.mT if g.size(-2) > g.size(-1) else x
    return run


def liger_rope(inputs_list):
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    def run(i):
        positions, q, k, cache = inputs_list[i]
        cos, sin = cache[positions].chunk(2, dim=-1)                  # [T, d/2] each
        cos = torch.cat((cos, cos), dim=-1)[None]                     # [1, T, d]: Liger's layout
        sin = torch.cat((sin, sin), dim=-1)[None]
        # [1, heads, T, d] views of q and k; Liger transposes back to [1, T, heads, d], contiguous
        # already, so its kernel rotates q and k where they lie.
        return liger_rotary_pos_emb(q[None].transpose(1, 2), k[None].transpose(1, 2), cos, sin)
    return run


LIBRARIES = {"rmsnorm_bwd": ("Liger-Kernel RMSNorm backward", liger_rmsnorm_backward),
             "swiglu_fwd_bwd": ("Liger-Kernel SwiGLU fwd+bwd", liger_swiglu),
             "newton_schulz5_muon": ("cuBLAS baddbmm epilogues", cublas_newton_schulz),
             "rope_qk_inplace": ("Liger-Kernel RoPE", liger_rope)}


def library_rows(task_id: str, flush: L2Flusher, budget_s: float) -> list[dict]:
    """The library against the reference, interleaved, per workload; a missing library is one row."""
    task = load_task(task_id)
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    name, make = LIBRARIES[task_id]
    dev = torch.device("cuda")
    rows = []
    for w in task.workloads:
        sets = [task.make_inputs(w, torch.Generator(dev).manual_seed(40 + k), dev) for k in range(4)]
        try:
            lib = make(sets)
            pair = time_pair(lib, reference.forward, [(k,) for k in range(3)], sets[:3], (3,), sets[3], flush,
                             budget_s)
        except ImportError as exc:
            return [{"task": task_id, "library": name, "error": f"not installed: {exc}"}]
        except Exception as exc:  # another release's API: say so in the table, go on with the other tasks
            rows.append({"task": task_id, "library": name, "error": f"{w.name}: {type(exc).__name__}: {exc}"[:200]})
            continue
        rows.append({"task": task_id, "workload": w.name, "library": name,
                     "library_ms": pair.baseline.median_ms, "library_spread": pair.baseline.spread,
                     "reference_ms": pair.candidate.median_ms, "reference_vs_library": pair.speedup,
                     "reference_vs_library_ci": pair.speedup_ci})
        print(f"{task_id:<24} {w.name:<14} {name}: {pair.baseline.median_ms:.4f} ms, reference "
              f"{pair.candidate.median_ms:.4f} ms, x{pair.speedup:.2f}", flush=True)
        del lib, sets
        torch.cuda.empty_cache()
    return rows


def heldout_rows(task_id: str, seeds: int) -> list[dict]:
    """The reference against the baseline on the GPU held-out shapes of several secret seeds."""
    task = load_task(task_id)
    baseline = load_module(str(task.baseline_path), f"baseline_{task_id}")
    reference = load_module(str(task.reference_path), f"reference_{task_id}")
    dev = torch.device("cuda")
    rows = []
    for seed in range(seeds):
        for w in task.spec.heldout.draw(random.Random(seed), False):
            inputs = task.make_inputs(w, torch.Generator(dev).manual_seed(seed), dev)
            copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            # The checked values: outputs, then the inputs a task updates in place (rope's q and k).
            expected = task.checked_values(as_tuple(baseline.forward(*copies)), copies)
            verdict = verdict_for(task, task.checked_values(as_tuple(reference.forward(*inputs)), inputs),
                                  expected, inputs)
            rows.append({"task": task_id, "seed": seed, "shape": w.name, "correct": verdict.ok,
                         "message": verdict.message, "max_rel_err": verdict.max_rel_err})
            print(f"{task_id:<24} held-out {w.name:<18} ok={verdict.ok} {verdict.message[:100]}", flush=True)
            del inputs, expected
            torch.cuda.empty_cache()
    return rows


def markdown(meta: dict, rows: list[dict], libs: list[dict], held: list[dict]) -> str:
    lines = [f"# Backward / fusion / optimizer references on the GPU ({meta['date']})", "",
             f"{meta['gpu']}, torch {meta['torch']}, triton {meta['triton']}; ceilings measured in this run: copy "
             f"{meta['ceilings']['copy_gbs']:.0f} GB/s, bf16 GEMM {meta['ceilings']['tflops']:.0f} TFLOP/s. Timing: "
             "the evaluator's protocol (cold L2, interleaved pairs, adaptive repetitions, medians; spread = IQR / "
             "median; 95% bootstrap CI).", "",
             "| task | workload | ok | eager ms | compile ms | reference ms (spread) | vs eager | vs compile | roofline |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['workload']} | {'yes' if r['correct'] else 'NO'} | {r['baseline_ms']:.4f} | "
                     f"{r['compile_ms']:.4f} | {r['reference_ms']:.4f} ({r['reference_spread']:.1%}) | "
                     f"{r['speedup_vs_eager']:.2f}x | {r['speedup_vs_compile']:.2f}x "
                     f"({r['speedup_vs_compile_ci'][0]:.2f}-{r['speedup_vs_compile_ci'][1]:.2f}) | "
                     f"{r['roofline_fraction']:.0%} |")
    lines += ["", "| task | workload | library | library ms (spread) | reference ms | reference vs library (95% CI) |",
              "|---|---|---|---|---|---|"]
    for r in libs:
        if "error" in r:
            lines.append(f"| {r['task']} | - | {r['library']} | {r['error']} | - | - |")
        else:
            lines.append(f"| {r['task']} | {r['workload']} | {r['library']} | {r['library_ms']:.4f} "
                         f"({r['library_spread']:.1%}) | {r['reference_ms']:.4f} | {r['reference_vs_library']:.2f}x "
                         f"({r['reference_vs_library_ci'][0]:.2f}-{r['reference_vs_library_ci'][1]:.2f}) |")
    lines += ["", "| task | seed | held-out shape | ok | max rel err | message |", "|---|---|---|---|---|---|"]
    for r in held:
        lines.append(f"| {r['task']} | {r['seed']} | {r['shape']} | {'yes' if r['correct'] else 'NO'} | "
                     f"{r['max_rel_err']:.3g} | {r['message'][:120]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--heldout-seeds", type=int, default=2)
    args = parser.parse_args()
    dev = torch.device("cuda")
    ceilings = measure_ceilings(dev)
    meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings, "budget_s": args.budget_s}
    print(meta, flush=True)
    flush = L2Flusher(dev)
    rows, libs, held = [], [], []
    for tid in args.tasks:
        held += heldout_rows(tid, args.heldout_seeds)
        rows += bench_task(tid, ceilings, flush, args.budget_s)
        torch.cuda.empty_cache()
        libs += library_rows(tid, flush, args.budget_s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"norm-fusion-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, "libraries": libs, "heldout": held},
                                                 indent=2, default=str))
    (out / f"{stem}.md").write_text(markdown(meta, rows, libs, held))
    print(markdown(meta, rows, libs, held))


if __name__ == "__main__":
    main()
