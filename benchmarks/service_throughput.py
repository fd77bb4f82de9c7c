"""Evaluations per minute against the number of envs, in a Gymnasium async vector env.

For each count N of ``--envs``: ``gymnasium.make_vec(D2K/<task>-v0, num_envs=N,
vectorization_mode="async")`` (each env in its own process with its own evaluation service; on the
GPU the services keep timed work apart through the GPU leases), every env writes the task's
reference, one untimed ``run_tests`` warms the caches and workers, then ``--rounds`` batched steps
of ``--tool`` (every env evaluates at once) are timed. Every verdict must be right (the reference is
correct; the stub env ``--wrong`` of them keep fails). On the GPU, ``nvidia-smi`` samples the GPU's
utilisation every 0.2 s during the timed rounds.

    python benchmarks/service_throughput.py [--backend interpreter] [--envs 1 2 4 8 16] [--rounds 3]
        [--tool run_tests] [--task fused_add_rmsnorm] [--no-spares] [--json PATH]

Prints one JSON line per count and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import d2k_env  # noqa: E402
from d2k_env.task import load_task  # noqa: E402


class GpuSampler:
    """``nvidia-smi``'s utilisation.gpu every 0.2 s, in a thread, while active."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                self.samples.append(statistics.mean(float(v) for v in out.stdout.split()))
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measure(task_id: str, backend: str, envs: int, rounds: int, tool: str, wrong: int, spares: bool) -> dict:
    task = load_task(task_id)
    reference = task.reference_path.read_text()
    vec = gym.make_vec(d2k_env.env_id(task_id), num_envs=envs, vectorization_mode="async", backend=backend,
                       evaluator_options={"spares": spares})
    try:
        started = time.perf_counter()
        vec.reset(seed=list(range(envs)))
        made = time.perf_counter() - started
        writes = tuple({"tool": "write_file", "args": {"path": "solution.py", "content": reference}}
                       if i >= wrong else {"tool": "list_files", "args": {}} for i in range(envs))
        vec.step(writes)
        expected = np.array([i >= wrong for i in range(envs)])
        _, _, _, _, infos = vec.step(tuple({"tool": "run_tests", "args": {}} for _ in range(envs)))
        assert (infos["evaluation"]["correct"] == expected).all(), infos["evaluation"]["correct"]
        sampler = GpuSampler() if backend == "cuda" else None
        waits = []
        started = time.perf_counter()
        if sampler:
            sampler.__enter__()
        try:
            for _ in range(rounds):
                _, _, _, _, infos = vec.step(tuple({"tool": tool, "args": {}} for _ in range(envs)))
                assert (infos["evaluation"]["correct"] == expected).all(), infos["evaluation"]["correct"]
                waits += list(infos["queue"]["waited_s"])
        finally:
            if sampler:
                sampler.__exit__(None, None, None)
        seconds = time.perf_counter() - started
    finally:
        vec.close()
    row = {"task": task_id, "backend": backend, "tool": tool, "envs": envs, "rounds": rounds, "spares": spares,
           "evaluations": envs * rounds, "seconds": round(seconds, 2),
           "per_minute": round(envs * rounds / seconds * 60, 1), "reset_s": round(made, 2),
           "waited_s_median": round(statistics.median(waits), 2), "waited_s_max": round(max(waits), 2),
           "load1": os.getloadavg()[0]}
    if sampler:
        row["gpu_util_median"] = statistics.median(sampler.samples) if sampler.samples else None
        row["gpu_util_mean"] = round(statistics.mean(sampler.samples), 1) if sampler.samples else None
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="fused_add_rmsnorm")
    parser.add_argument("--backend", default="interpreter", choices=("interpreter", "cuda"))
    parser.add_argument("--envs", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tool", default="run_tests", choices=("run_tests", "benchmark"))
    parser.add_argument("--wrong", type=int, default=1, help="envs that keep the stub (their verdicts must fail)")
    parser.add_argument("--no-spares", action="store_true", help="every worker started fresh (less memory: "
                                                                 "16 envs hold 64 workers with spares)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch
    import triton
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    device = torch.cuda.get_device_name(0) if args.backend == "cuda" else f"{os.cpu_count()} CPUs"
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} commit {commit}, {device}, Python {platform.python_version()}, "
          f"torch {torch.__version__}, Triton {triton.__version__}, load {os.getloadavg()}", flush=True)
    rows = [measure(args.task, args.backend, n, args.rounds, args.tool, min(args.wrong, n - 1), not args.no_spares)
            for n in args.envs]
    gpu = args.backend == "cuda"
    print(f"\n| envs | {args.tool} evaluations | seconds | per minute | wait in queue, s, median (max) |"
          + (" GPU busy, % (mean) |" if gpu else "") + "\n|---|---|---|---|---|" + ("---|" if gpu else ""))
    for r in rows:
        print(f"| {r['envs']} | {r['evaluations']} | {r['seconds']} | {r['per_minute']} | "
              f"{r['waited_s_median']} ({r['waited_s_max']}) |" + (f" {r['gpu_util_mean']} |" if gpu else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
