"""Issue 11, items 5 and 6 on the GPU, in one device call: writes its JSON and a log under OUT_DIR.

1. compute-sanitizer: where it is, what it offers, and a torch program under it outside the sandbox
   (so that a failure inside the sandbox can be told from a tool that does not work here at all).
2. Memory safety inside the evaluator: each task's reference submitted (one published workload, its
   held-out shapes under memcheck): it must stay correct; the time of every worker run (solution,
   check, memcheck) is recorded, so the memory checker's added cost per submit is measured, alone
   first (quant) and then with the other tasks running beside the GPU cases of
   tests/security/memory_safety/ (the issue's exploit, m02, must score 0 with [out-of-bounds]).
3. Run-to-run spread of launch-bound speedups: one reference against its baseline, timed by the
   evaluator's own time_pair, in REPEATS separate processes one after another; for each run its
   speedup and three intervals (the old per-sample bootstrap, the batch bootstrap, and the reported
   one with its floor), and whether each run's interval covers every other run's speedup.

Usage: python3 benchmarks/memory_safety_gpu.py OUT_DIR [attach]   (`--timing-run` is internal)
`attach` runs only the sanitizer's parts: which sandbox layer keeps it from attaching to a worker
(each alone, then all), and the quant reference and the issue's exploit submitted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPEATS = 6
TIMED = [("per_token_group_quant_fp8", "64x7168"), ("fused_add_rmsnorm", "64x8192"),
         ("per_token_group_quant_fp8", "4096x7168")]
SUBMITS = {"per_token_group_quant_fp8": "64x7168", "fused_add_rmsnorm": "64x8192",
           "merge_attn_states": "4096x64x128"}


def timing_run(budget_s: float) -> None:
    """Child mode: one process, every TIMED workload, printed as one JSON line."""
    import numpy as np
    import torch

    from d2k_env.evaluator.timing import (CI_FLOOR, LAUNCH_BOUND_CI_FLOOR, L2Flusher, speedup_interval,
                                          time_pair)
    from d2k_env.evaluator.worker import load_module
    from d2k_env.task import load_task

    flush, rows = L2Flusher(torch.device("cuda")), []
    for task_id, name in TIMED:
        task = load_task(task_id)
        w = task.workload(name)
        base = load_module(str(task.baseline_path), f"b_{task_id}")
        ref = load_module(str(task.reference_path), f"r_{task_id}")

        def inputs(*role):
            gen = torch.Generator(device="cuda")
            gen.manual_seed(hash((task_id, name, *role)) & 0xFFFFFFFF)
            return task.make_inputs(w, gen, "cuda")

        floor = LAUNCH_BOUND_CI_FLOOR if w.launch_bound else CI_FLOOR
        pair = time_pair(base.forward, ref.forward, [inputs("b", i) for i in range(3)],
                         [inputs("c", i) for i in range(3)], inputs("wb"), inputs("wc"), flush, budget_s=budget_s,
                         seed=7, ci_floor=floor)
        tb, tc = np.asarray(pair.baseline.samples), np.asarray(pair.candidate.samples)
        rng = np.random.default_rng(7)
        idx = rng.integers(0, len(tb), size=(500, len(tb)))  # the interval reported before: samples one by one
        old = np.percentile(np.median(tb[idx], axis=1) / np.median(tc[idx], axis=1), [2.5, 97.5])
        rows.append({"task": task_id, "workload": name, "launch_bound": w.launch_bound, "speedup": pair.speedup,
                     "ci": pair.speedup_ci, "ci_batches": speedup_interval(tb, tc, 5, 7, 0.0),
                     "ci_samples": [float(old[0]), float(old[1])], "floor": floor, "reps": pair.repetitions,
                     "baseline_ms": pair.baseline.median_ms, "solution_ms": pair.candidate.median_ms})
    print("TIMING " + json.dumps(rows), flush=True)


def sanitizer_probe(log) -> dict:
    from d2k_env.evaluator.memcheck import find_memcheck
    tool = find_memcheck()
    probe = {"tool": None if tool is None else {"path": tool.path, "version": tool.version,
                                                "options": sorted(tool.options)}}
    if tool is not None:
        started = time.monotonic()
        out = subprocess.run([tool.path, "--tool", "memcheck", sys.executable, "-c",
                              "import torch; x = torch.zeros(4, device='cuda'); print('sum', x.sum().item())"],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
        probe["plain"] = {"rc": out.returncode, "s": round(time.monotonic() - started, 1),
                          "tail": (out.stdout + out.stderr)[-1500:]}
    log(json.dumps(probe, indent=1))
    return probe


def submits(out: Path, log) -> dict:
    """References under memcheck (quant alone first, then the others beside the GPU tests)."""
    from d2k_env.evaluator import sandbox
    from d2k_env.evaluator import Evaluator
    from d2k_env.task import load_task
    from d2k_env.verdict import format_result

    runs, stock = [], sandbox.Worker.run

    def timed_run_worker(worker, req, limits):
        started = time.monotonic()
        outcome = stock(worker, req, limits)
        runs.append({"task": req.task_id, "role": req.role, "memcheck": req.memcheck,
                     "s": round(time.monotonic() - started, 2), "returncode": outcome.returncode,
                     "layers": outcome.layers, **({"output_tail": outcome.output[-1500:],
                                                   "log_head": outcome.memcheck_log[:1500]} if req.memcheck else {})})
        return outcome

    sandbox.Worker.run = timed_run_worker
    results = {}

    def submit(task_id: str) -> None:
        ev = Evaluator(load_task(task_id), "cuda", time_budget_s=1.0)
        started = time.monotonic()
        try:
            r = ev.evaluate(ev.task.reference_path, "submit", workloads=[SUBMITS[task_id]], seed=11)
        finally:
            ev.close()
        results[task_id] = {"correct": r.correct, "s": round(time.monotonic() - started, 1),
                            "memcheck": r.sandbox.get("memcheck"), "sandbox": r.sandbox,
                            "verdict": format_result(r)[-1500:]}
        log(f"{task_id}: correct={r.correct} in {results[task_id]['s']} s; memcheck: {r.sandbox.get('memcheck')}")

    submit("per_token_group_quant_fp8")
    tests = subprocess.Popen([sys.executable, "-m", "pytest", "-m", "gpu", "tests/test_security.py", "-k", "memory_safety",
                              "-v", "-rA", "-p", "no:cacheprovider"], stdout=open(out / "test_memory_safety_gpu.log", "w"),
                             stderr=subprocess.STDOUT)
    threads = [threading.Thread(target=submit, args=(t,)) for t in ("fused_add_rmsnorm", "merge_attn_states")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tests.wait(timeout=400)
    sandbox.Worker.run = stock
    log((out / "test_memory_safety_gpu.log").read_text()[-2500:])
    return {"submits": results, "runs": runs}


def repeats(log) -> dict:
    rows = []
    for i in range(REPEATS):
        out = subprocess.run([sys.executable, __file__, "--timing-run"], capture_output=True, text=True, timeout=120)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("TIMING ")), None)
        if line is None:
            log(f"timing run {i} failed: {out.stderr[-1500:]}")
            continue
        rows.append(json.loads(line[7:]))
        time.sleep(2)  # runs separated in time as well as by process
    summary = []
    for k, (task_id, name) in enumerate(TIMED):
        runs = [r[k] for r in rows]
        speedups = [r["speedup"] for r in runs]
        row = {"task": task_id, "workload": name, "speedups": speedups,
               "range_pct": 100 * (max(speedups) / min(speedups) - 1) if speedups else None}
        for kind in ("ci_samples", "ci_batches", "ci"):
            row[f"{kind}_covers_all"] = sum(all(r[kind][0] <= s <= r[kind][1] for s in speedups) for r in runs)
            row[f"{kind}_mean_width_pct"] = (sum(100 * (r[kind][1] - r[kind][0]) / r["speedup"] for r in runs)
                                             / max(len(runs), 1))
        summary.append(row)
        log(f"{task_id} {name}: speedups {', '.join(f'{s:.3f}' for s in speedups)} (range {row['range_pct']:.1f}%); "
            f"runs whose interval covers every run's speedup: per-sample {row['ci_samples_covers_all']}, "
            f"batches {row['ci_batches_covers_all']}, reported {row['ci_covers_all']} of {len(runs)}")
    return {"runs": rows, "summary": summary}


_TARGET = """
import sys
if "seccomp" in sys.argv:
    from d2k_env.evaluator.confine import seccomp
    seccomp(processes=True)
import torch
print("sum", torch.zeros(4, device="cuda").sum().item())
"""


def attach_probe(log, work: Path) -> dict:
    """Which sandbox layer keeps compute-sanitizer from attaching: a trusted torch program under the
    tool with each layer alone, then all, applied as the supervisor applies them (before the tool's
    exec; seccomp inside the target, as the worker installs it)."""
    from d2k_env.evaluator import confine, sandbox
    from d2k_env.evaluator.memcheck import find_memcheck, read_log
    tool = find_memcheck()
    target = work / "target.py"
    target.write_text(_TARGET)
    cache = work / "cache"
    variants = {"none": set(), "netns+lo": {"netns"}, "landlock": {"landlock"}, "caps": {"caps"},
                "seccomp": {"seccomp"}, "all": {"netns", "landlock", "caps", "seccomp"},
                # which Landlock rule the tool needs: the run's own rules (with /dev/shm writable),
                # without /dev/shm, with every path readable, with every path writable
                "landlock-no-shm": {"landlock", "no-shm"}, "landlock-read-all": {"landlock", "read-all"},
                "landlock-write-all": {"landlock", "write-all"}}
    found = {}
    for name, layers in variants.items():
        scratch = work / f"scratch-{name}"
        scratch.mkdir()
        conf = sandbox.confinement_for(str(scratch), cache, str(work), str(work), "solution", False, tool, 30000)

        def apply(layers=layers, conf=conf):
            if "netns" in layers:
                sandbox._limit_child(True)
            if "landlock" in layers:
                read = ["/"] if "read-all" in layers else conf.read + [str(target)]
                write = ["/"] if "write-all" in layers else [
                    w for w in conf.write if not ("no-shm" in layers and w == "/dev/shm")]
                confine._landlock(read, write, conf.devices, confine.landlock_abi(), conf.tcp_ports)
            if "caps" in layers:
                confine._drop_capabilities()

        log_path = str(scratch / "memcheck.log")
        started = time.monotonic()
        out = subprocess.run([*tool.argv(log_path, 30000), sys.executable, str(target), *sorted(layers)],
                             capture_output=True, text=True, timeout=120, preexec_fn=apply, cwd=scratch,
                             env=sandbox.child_environment(str(scratch), cache, False, True))
        found[name] = {"rc": out.returncode, "s": round(time.monotonic() - started, 1),
                       "log": read_log(log_path)[-600:], "out": (out.stdout + out.stderr)[-600:]}
        log(f"attach probe {name}: rc {out.returncode} in {found[name]['s']} s; log {found[name]['log']!r}; "
            f"out {found[name]['out'][-300:]!r}")
    return found


WRITE_CANDIDATES = ("/tmp", "/proc", "/dev", "/var", "/run", "/root", "/etc", "/sys")


def write_probe(log, work: Path) -> dict:
    """Which one extra writable root lets the tool attach under every other Landlock rule of a run;
    then, with the first that does, the exploit and the reference submitted again."""
    from d2k_env.evaluator import confine, sandbox
    from d2k_env.evaluator.memcheck import find_memcheck, read_log
    tool = find_memcheck()
    target = work / "target.py"
    target.write_text(_TARGET)
    cache = work / "cache"
    found = {}
    for extra in WRITE_CANDIDATES:
        scratch = work / f"scratch{extra.replace('/', '-')}"
        scratch.mkdir()
        conf = sandbox.confinement_for(str(scratch), cache, str(work), str(work), "solution", False, tool, 30000)

        def apply(conf=conf, extra=extra):
            confine._landlock(conf.read + [str(target)], conf.write + [extra], conf.devices,
                              confine.landlock_abi(), conf.tcp_ports)

        log_path = str(scratch / "memcheck.log")
        out = subprocess.run([*tool.argv(log_path, 30000), sys.executable, str(target)], capture_output=True,
                             text=True, timeout=120, preexec_fn=apply, cwd=scratch,
                             env=sandbox.child_environment(str(scratch), cache, False, True))
        found[extra] = {"rc": out.returncode, "log": read_log(log_path)[-300:]}
        log(f"write probe +{extra}: rc {out.returncode}; log {found[extra]['log']!r}")
    works = [x for x, r in found.items() if r["rc"] == 0]
    if works:
        stock = sandbox.confinement_for

        def widened(*args, **kwargs):
            conf = stock(*args, **kwargs)
            if conf.tcp_ports:  # a memcheck run
                conf.write.append(works[0])
            return conf

        sandbox.confinement_for = widened
        try:
            found["submits with +" + works[0]] = exploit_and_reference(log)
        finally:
            sandbox.confinement_for = stock
    return found


def exploit_and_reference(log) -> dict:
    """The issue's exploit (seed 1) and the quant reference, submitted as the tests do; each run timed."""
    from d2k_env.evaluator import sandbox
    from d2k_env.evaluator import Evaluator
    from d2k_env.task import load_task
    from d2k_env.verdict import format_result

    runs, stock, results = [], sandbox.Worker.run, {}

    def timed_run_worker(worker, req, limits):
        started = time.monotonic()
        outcome = stock(worker, req, limits)
        runs.append({"role": req.role, "memcheck": req.memcheck, "s": round(time.monotonic() - started, 2),
                     "returncode": outcome.returncode, "log_head": outcome.memcheck_log[:800]})
        return outcome

    sandbox.Worker.run = timed_run_worker
    ev = Evaluator(load_task("per_token_group_quant_fp8"), "cuda", time_budget_s=0.5)
    try:
        for label, path, kwargs in (("reference", ev.task.reference_path, {"workloads": ["64x7168"], "seed": 11}),
                                    ("m02", Path("tests/security/memory_safety/quant_no_group_mask_gpu.py"),
                                     {"seed": 1})):
            started = time.monotonic()
            r = ev.evaluate(path, "submit", **kwargs)
            results[label] = {"correct": r.correct, "s": round(time.monotonic() - started, 1),
                              "memcheck": r.sandbox.get("memcheck"), "verdict": format_result(r)[-1200:]}
            log(f"{label}: correct={r.correct} in {results[label]['s']} s\n{results[label]['verdict']}\n"
                f"memcheck: {r.sandbox.get('memcheck')}")
    finally:
        ev.close()
        sandbox.Worker.run = stock
    log(json.dumps(runs, indent=1))
    return {"submits": results, "runs": runs}


def main() -> None:
    if sys.argv[1:] == ["--timing-run"]:
        timing_run(budget_s=2.0)
        return
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    part = sys.argv[2] if len(sys.argv) > 2 else "all"
    logf = open(out / "memory_safety_gpu.log", "w")

    def log(text: str) -> None:
        print(text, flush=True)
        logf.write(text + "\n")
        logf.flush()

    import torch
    import triton
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "triton": triton.__version__}
    log(json.dumps(report))
    started = time.monotonic()
    report["sanitizer"] = sanitizer_probe(log)
    if part == "write":
        import tempfile
        with tempfile.TemporaryDirectory() as work:
            os.chmod(work, 0o755)
            report["write"] = write_probe(log, Path(work))
        (out / "memory_safety_gpu_write.json").write_text(json.dumps(report, indent=1))
        log(f"total {time.monotonic() - started:.0f} s")
        return
    if part == "attach":  # why the tool did not attach inside the sandbox, and the exploit as submitted
        import tempfile
        with tempfile.TemporaryDirectory() as work:
            os.chmod(work, 0o755)
            report["attach"] = attach_probe(log, Path(work))
        report["exploit"] = exploit_and_reference(log)
        (out / "memory_safety_gpu_attach.json").write_text(json.dumps(report, indent=1))
        log(f"total {time.monotonic() - started:.0f} s")
        return
    report["memory_safety"] = submits(out, log)
    log(f"memory-safety part: {time.monotonic() - started:.0f} s")
    report["timing"] = repeats(log)
    (out / "memory_safety_gpu.json").write_text(json.dumps(report, indent=1))
    log(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
