"""Where a fresh GPU worker's warm-up goes, step by step, outside the sandbox.

A one-shot evaluation (``d2k eval``) waits for its solution worker's warm-up before anything is
timed; this script splits that warm-up into the steps the worker takes (the same calls as
``worker.prepare`` and ``worker.warm_device``) and tries orderings of them, each in a fresh Python
process started by exec, as the pool starts one:

- ``sequential``: the worker's order: imports, Triton's key, the CUDA context, the profiler's start-up
  (the worker's own, ``worker.gpu_kernel_profiler``), twice.
- ``wrapper``: the same with ``torch.profiler.profile`` instead, whose start imports ``torch._inductor``.
- ``pair``: two ``sequential`` processes at once, as a solution worker and a check worker start.
- ``pool``: the real thing, sandbox included: an exec'd pool's two spares (as ``d2k eval`` starts
  them), each one's seconds from its start to its warm mark.

Each process prints one JSON line: the variant and, per step, the seconds since the parent started
the process. ``nvidia-smi``'s persistence mode is printed first, since a GPU without it is
initialised again by the first process to open it.

    python benchmarks/worker_warmup.py [--repeat 3] [--variants sequential wrapper pair pool]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
start = float(sys.argv[1]); variant = sys.argv[2]
steps = []
def mark(name):
    steps.append((name, round(time.time() - start, 3)))
mark("python")
import torch
mark("import torch")
import d2k_env.evaluator.worker as worker
mark("import worker")
import triton.language
mark("import triton.language")
from triton.runtime.cache import triton_key
triton_key()
mark("triton_key")
from torch import profiler
from d2k_env.evaluator import timing
mark("import profiler+timing")
with worker.TorchWorkGuard(frozenset()):
    torch.empty(1)
mark("guarded alloc")
torch.zeros(1, device="cuda:0")
mark("cuda context")
import warnings
from torch.profiler import ProfilerActivity, profile
for label in ("profiler first", "profiler second"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with (profile(activities=[ProfilerActivity.CUDA]) if variant == "wrapper" else worker.gpu_kernel_profiler()):
            torch.zeros(1, device="cuda:0")
            torch.cuda.synchronize()
    mark(label)
print(json.dumps({"variant": variant, "steps": steps}), flush=True)
"""


def start(variant: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-c", CHILD, repr(time.time()), variant.replace("pair", "sequential")],
                            env=env, stdout=subprocess.PIPE, text=True)


def pool_warmup() -> dict:
    sys.path.insert(0, str(ROOT))
    from d2k_env.evaluator.pool import WorkerPool

    pool = WorkerPool(interpret=False, spares=True, fork=False)
    started = time.time()
    try:
        pool.replenish()
        steps = []
        for kind, worker in pool.idle().items():
            worker.wait_warm(120.0)
            steps.append((f"{kind} warm", round(time.time() - started, 3)))
    finally:
        pool.close()
    return {"variant": "pool", "spares": pool.spares, "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", nargs="*", default=["sequential", "wrapper", "pair", "pool"],
                        choices=["sequential", "wrapper", "pair", "pool"])
    args = parser.parse_args()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,persistence_mode,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        smi = "no nvidia-smi"
    print(f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; GPU, persistence, driver: {smi}", flush=True)
    for _ in range(args.repeat):
        for variant in args.variants:
            if variant == "pool":
                print(json.dumps(pool_warmup()), flush=True)
                continue
            procs = [start(variant) for _ in range(2 if variant == "pair" else 1)]
            for i, p in enumerate(procs):
                out, _ = p.communicate()
                line = json.loads(out.strip().splitlines()[-1])
                if variant == "pair":
                    line["variant"] = f"pair[{i}]"
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
