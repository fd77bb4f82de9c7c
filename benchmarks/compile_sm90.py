"""Compile every reference's kernels for sm_90 (H100/H200) on a machine without a GPU.

The CPU interpreter runs a kernel's Python; it never runs Triton's GPU front end, its type rules or
its shared-memory budget, so a reference that passes every CPU test can still fail to compile on the
GPU (a variable whose block shape changes in an ``if``, a config that asks for more shared memory than
an SM has). This script calls each task's reference ``forward`` on CPU tensors of the task's GPU
shapes (the published workloads and the held-out shapes of several seeds) with Triton's CUDA driver
replaced by a stand-in for an sm_90 device: each launch is compiled by Triton's real compiler (its
bundled ptxas included) and not run. It reports, per task, the kernels compiled, the largest shared
memory one asks for against the H100's 232,448 bytes a block may opt into, and every compile error.

An autotuned kernel compiles each of its configs; as on the GPU, a config that does not fit is
skipped, and the launch fails only when none fits.

Usage:  python3 benchmarks/compile_sm90.py [TASK ...] [--seeds N] [--json FILE]
        python3 benchmarks/compile_sm90.py TASK --solution FILE   (a solution of TASK instead of its reference)
"""

from __future__ import annotations

import argparse
import atexit
import inspect
import json
import linecache
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

# Must be unset: the interpreter would run the kernels instead of compiling them.
os.environ.pop("TRITON_INTERPRET", None)
# A cache of its own: a kernel found in a cache is not compiled again, and its front end not run.
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="d2k-sm90-cache-")
atexit.register(shutil.rmtree, os.environ["TRITON_CACHE_DIR"], True)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.driver import CudaDriver  # noqa: E402
from triton.runtime import autotuner, driver, jit  # noqa: E402

from d2k_env.evaluator.recorder import Recorder  # noqa: E402
from d2k_env.evaluator.recording import Recording  # noqa: E402
from d2k_env.evaluator.replay import rebuild_kernels  # noqa: E402
from d2k_env.evaluator.worker import load_module  # noqa: E402
from d2k_env.task import load_task, task_ids  # noqa: E402

SM90_SHARED_BYTES = 232_448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 and H200 (227 KiB)


class Sm90StandIn(CudaDriver):
    """Triton's CUDA driver minus the device: the target an H100 reports, device 0, stream 0."""

    def __init__(self):  # the parent loads libcuda, which is not here
        self.utils = None
        self.launcher_cls = None

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")

    def is_active(self):
        return True


class TooMuchSharedMemory(Exception):
    pass


class Compiles:
    """Installs the compile-only launch path and collects what it compiled.

    What compiles is what the GPU runs under the trust boundary: each launched kernel rebuilt by the
    trusted replay (:func:`d2k_env.evaluator.replay.rebuild_kernels`) from the file's text and the
    kernel table a recording of it holds (:class:`d2k_env.evaluator.recorder.Recorder`), called with
    every argument, defaults filled in, as a recorded launch passes them."""

    def __init__(self):
        self.kernels: dict[tuple, dict] = {}  # (kernel, compiled hash) -> its metadata
        self.recorders: dict[str, Recorder] = {}  # file -> the kernel table a recording of it would hold
        self.rebuilt: dict[str, object] = {}  # kernel key -> the replay's jit function

    def replayed(self, fn):
        path = fn.fn.__code__.co_filename
        recorder = self.recorders.setdefault(path, Recorder((), path))
        key = recorder.kernel_key(fn)
        if key not in self.rebuilt:
            # The replay puts its rebuilt text in linecache under the file's name (in its own process);
            # the recorder here reads the file's own lines: both are kept apart.
            kept = linecache.cache.pop(path, None)
            try:
                self.rebuilt.update(rebuild_kernels(Path(path).read_text(), path,
                                                    Recording((), (), (), dict(recorder.kernels))))
            finally:
                linecache.cache.pop(path, None)
                if kept is not None:
                    linecache.cache[path] = kept
        return self.rebuilt[key]

    def install(self) -> None:
        driver.set_active(Sm90StandIn())
        run, compiles = jit.JITFunction.run, self

        def compile_only(fn, *args, grid, warmup, **kwargs):
            params = inspect.signature(fn.fn).parameters
            bound = inspect.signature(fn.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in params})
            bound.apply_defaults()
            options = {k: v for k, v in kwargs.items() if k not in params}
            kernel = run(compiles.replayed(fn), grid=grid, warmup=True, **bound.arguments, **options)
            shared = kernel.metadata.shared
            compiles.kernels[(fn.__name__, kernel.hash)] = {
                "kernel": fn.__name__, "shared": shared, "num_warps": kernel.metadata.num_warps,
                "num_stages": kernel.metadata.num_stages}
            if shared > SM90_SHARED_BYTES:
                raise TooMuchSharedMemory(f"{fn.__name__} asks for {shared} bytes of shared memory; an sm_90 block "
                                          f"may have {SM90_SHARED_BYTES}")
            return kernel

        def tune_by_compiling(tuner, *args, **kwargs):
            # On the GPU the tuner times each config and skips those that fail to launch: here each
            # is compiled, and the first that fits stands for the tuner's choice.
            errors = []
            for config in tuner.configs:
                try:
                    return tuner.fn.run(*args, **kwargs, **config.all_kwargs())
                except TooMuchSharedMemory as exc:
                    errors.append(str(exc))
            raise TooMuchSharedMemory("no config fits: " + "; ".join(errors[:3]))

        jit.JITFunction.run = compile_only
        autotuner.Autotuner.run = tune_by_compiling


def check_task(task_id: str, seeds: int, compiles: Compiles, solution: Path | None = None) -> dict:
    task = load_task(task_id)
    path = solution or task.reference_path
    reference = load_module(str(path), f"d2k_reference_{path.stem}")
    shapes = list(task.workloads)
    seen = {w.name for w in shapes}
    for seed in range(1, seeds + 1):
        for w in task.heldout_workloads(seed, smoke=False):
            if w.name not in seen:
                seen.add(w.name)
                shapes.append(w)
    before = set(compiles.kernels)
    failures = []
    for w in shapes:
        gen = torch.Generator().manual_seed(0)
        try:
            inputs = task.make_inputs(w, gen, torch.device("cpu"))
        except (RuntimeError, MemoryError) as exc:
            failures.append({"workload": w.name, "error": f"inputs not made on the CPU: {exc}"[:300]})
            continue
        try:
            reference.forward(*inputs)
        except Exception as exc:  # noqa: BLE001 - every failure is the report
            tail = traceback.format_exception_only(exc)[-1].strip()
            failures.append({"workload": w.name, "error": tail[:1500]})
        del inputs
    compiled = [compiles.kernels[k] for k in compiles.kernels.keys() - before]
    return {"task": task_id, "shapes": len(shapes), "compiled": len(compiled),
            "max_shared": max((k["shared"] for k in compiled), default=0), "failures": failures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", help="task ids (default: every task)")
    parser.add_argument("--seeds", type=int, default=8, help="held-out draws per task (seeds 1..N)")
    parser.add_argument("--solution", type=Path, help="compile this file (forward(*inputs)) instead of the "
                                                      "reference, on the shapes of the one task named")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    if args.solution and len(args.tasks) != 1:
        parser.error("--solution needs exactly one task, whose shapes it is compiled on")
    compiles = Compiles()
    compiles.install()
    print(f"triton {triton.__version__}, torch {torch.__version__}; target sm_90, shared memory per block "
          f"{SM90_SHARED_BYTES} B")
    reports, bad = [], 0
    for task_id in args.tasks or task_ids():
        t0 = time.perf_counter()
        report = check_task(task_id, args.seeds, compiles, args.solution and args.solution.resolve())
        report["seconds"] = round(time.perf_counter() - t0, 1)
        reports.append(report)
        verdict = "ok" if not report["failures"] else f"{len(report['failures'])} FAILED"
        bad += bool(report["failures"])
        print(f"{task_id:32s} {report['shapes']:3d} shapes {report['compiled']:3d} kernels "
              f"max shared {report['max_shared']:7d} B {report['seconds']:6.1f} s  {verdict}", flush=True)
        for failure in report["failures"][:4]:
            print(f"    {failure['workload']}: {failure['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
