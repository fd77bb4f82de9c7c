"""Timing under load on one GPU: ``d2k eval --mode submit`` of a reference alone, then N at once.

Issue 24: three submits at once on one H100 doubled the baseline's time on several workloads
(quant 16384x8192: 4.13 ms against 2.09 ms alone) and the speedups with it. With the machine-wide
lease every timed phase has the GPU to itself, so each of the N concurrent submits must report, for
every workload, a speedup inside the interval of the one alone (or intervals that overlap it), and
baseline times within the band of the alone run's. Each process's lease waits and any baseline
re-measure are reported too.

Each run gets its own empty baseline-times cache (``D2K_BASELINE_CACHE``), so what is checked is the
lease alone, not the cache's re-measure (``--shared-cache`` gives them one, which also exercises it).

Usage (from the repo root, one GPU):
    python3 benchmarks/concurrent_submits_gpu.py OUT_DIR [--tasks per_token_group_quant_fp8 ...] [-n 4]
Writes OUT_DIR/concurrent-submits.json and prints a table; exits 1 when a concurrent speedup falls
outside the alone run's interval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BAND = 0.10  # a concurrent run's baseline median may differ from the alone run's by this much


def submit(task: str, reference: Path, json_path: Path, cache: Path, seed: int) -> subprocess.Popen:
    env = {**os.environ, "D2K_BASELINE_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "d2k_env.cli", "eval", task, str(reference), "--mode", "submit", "--seed", str(seed),
            "--json", str(json_path)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, json_path: Path) -> dict:
    output, _ = proc.communicate()
    if not json_path.exists():
        raise SystemExit(f"d2k eval wrote no result (exit {proc.returncode}):\n{output[-3000:]}")
    return json.loads(json_path.read_text())


def by_workload(result: dict) -> dict[str, dict]:
    return {w["name"]: w for w in result["workloads"] if w.get("speedup") is not None}


def main() -> int:
    from d2k_env.task import load_task

    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--tasks", nargs="+", default=["per_token_group_quant_fp8", "fused_add_rmsnorm"])
    parser.add_argument("-n", type=int, default=4, help="submits at once (default 4)")
    parser.add_argument("--shared-cache", action="store_true", help="one baseline-times cache for every run")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report, failures = {}, []
    for task in args.tasks:
        reference = load_task(task).reference_path
        cache = lambda tag: out / (f"{task}-baseline-times.json" if args.shared_cache else f"{task}-{tag}-times.json")
        started = time.time()
        alone_json = out / f"{task}-alone.json"
        alone = finish(submit(task, reference, alone_json, cache("alone"), 1), alone_json)
        alone_s = time.time() - started
        started = time.time()
        procs = [(submit(task, reference, out / f"{task}-at-once-{i}.json", cache(f"at-once-{i}"), 1),
                  out / f"{task}-at-once-{i}.json") for i in range(args.n)]
        at_once = [finish(p, path) for p, path in procs]
        at_once_s = time.time() - started
        rows = []
        for name, a in by_workload(alone).items():
            for i, r in enumerate(at_once):
                w = by_workload(r).get(name)
                if w is None:
                    failures.append(f"{task} {name}: run {i} has no speedup ({r.get('error')})")
                    continue
                lo, hi = a["speedup_ci"]
                overlap = w["speedup_ci"][0] <= hi and lo <= w["speedup_ci"][1]
                base_off = w["baseline_ms"] / a["baseline_ms"] - 1
                ok = overlap and abs(base_off) <= BAND
                rows.append({"workload": name, "run": i, "alone_speedup": a["speedup"], "alone_ci": a["speedup_ci"],
                             "speedup": w["speedup"], "ci": w["speedup_ci"], "alone_baseline_ms": a["baseline_ms"],
                             "baseline_ms": w["baseline_ms"], "baseline_off": base_off, "ok": ok,
                             "baseline_note": w.get("baseline_note")})
                if not ok:
                    failures.append(f"{task} {name} run {i}: speedup {w['speedup']:.3f} {w['speedup_ci']} against "
                                    f"{a['speedup']:.3f} {a['speedup_ci']} alone; baseline {base_off:+.1%}")
        if not rows:
            failures.append(f"{task}: no timed workload to compare (is this the cuda backend?)")
        waits = [[(p["phase"], p["exclusive"], p["waited_s"], p["held_s"]) for p in r.get("lease", [])]
                 for r in at_once]
        report[task] = {"alone_s": alone_s, "at_once_s": at_once_s, "rows": rows, "leases": waits,
                        "memcheck": [r.get("sandbox", {}).get("memcheck") for r in [alone, *at_once]],
                        "correct": [r.get("correct") for r in [alone, *at_once]]}
        print(f"\n{task}: alone {alone_s:.1f} s, {args.n} at once {at_once_s:.1f} s; "
              f"correct {report[task]['correct']}")
        print(f"{'workload':<16} {'run':>3} {'alone':>8} {'alone 95% CI':>15} {'at once':>8} {'95% CI':>15} "
              f"{'baseline':>9} ok")
        for row in rows:
            print(f"{row['workload']:<16} {row['run']:>3} {row['alone_speedup']:8.3f} "
                  f"{row['alone_ci'][0]:7.3f}-{row['alone_ci'][1]:<7.3f} {row['speedup']:8.3f} "
                  f"{row['ci'][0]:7.3f}-{row['ci'][1]:<7.3f} {row['baseline_off']:+9.1%} "
                  f"{'yes' if row['ok'] else 'NO'}")
        for i, w in enumerate(waits):
            print(f"  run {i} leases (phase, exclusive, waited s, held s): {w}")
        print(f"  memcheck: {report[task]['memcheck']}")
    (out / "concurrent-submits.json").write_text(json.dumps({"report": report, "failures": failures}, indent=1))
    print("\n" + ("\n".join(failures) if failures else "every concurrent speedup lies within the alone run's interval"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
