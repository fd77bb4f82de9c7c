"""Evaluation worker: runs in a child process, one evaluation per process.

Usage (by :mod:`d2k_env.evaluator.sandbox` only): ``python -m d2k_env.evaluator.worker FD`` with the
JSON :class:`EvalRequest` on stdin. The JSON :class:`EvalResult` is written to file descriptor FD,
the harness's own channel: whatever the solution prints goes to stdout/stderr and never counts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import traceback
from types import ModuleType

import torch

from d2k_env.evaluator.checking import allclose_check, as_tuple, check_contract
from d2k_env.evaluator.protocol import EvalRequest, EvalResult, WorkloadResult
from d2k_env.task import Task, Workload, load_task

TIMED_SETS = 3


def derive_seed(secret: int, *parts: object) -> int:
    """A 63-bit seed from the secret and the purpose of the inputs (workload, role, index)."""
    text = ":".join(str(p) for p in (secret, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def short_traceback(exc: BaseException, limit_chars: int = 3000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit_chars else "...\n" + text[-limit_chars:]


class Worker:
    def __init__(self, req: EvalRequest):
        self.req = req
        self.task: Task = load_task(req.task_id, req.root)
        self.device = torch.device("cuda" if req.device == "cuda" else "cpu")
        self.baseline = load_module(str(self.task.baseline_path), "d2k_baseline")
        self.result = EvalResult(mode=req.mode, backend="cuda" if req.device == "cuda" else "interpreter",
                                 versions={"torch": torch.__version__, "triton": _triton_version(),
                                           "python": sys.version.split()[0]})
        if self.device.type == "cuda":
            self.result.device_name = torch.cuda.get_device_name(self.device)

    def inputs(self, w: Workload, *role: object) -> tuple:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(derive_seed(self.req.seed, self.task.id, w.name, *role))
        return self.task.make_inputs(w, gen, self.device)

    def run(self) -> EvalResult:
        try:
            solution = load_module(self.req.solution_path, "solution")
            forward = getattr(solution, "forward", None)
            if not callable(forward):
                raise AttributeError("solution.py must define a function forward(*inputs)")
        except BaseException as exc:  # noqa: BLE001 - anything the solution does at import is its fault
            self.result.error = f"solution.py failed to load:\n{short_traceback(exc)}"
            return self.result
        workloads = [self.task.workload(n, smoke=self.req.smoke) for n in self.req.workloads]
        if self.req.mode == "profile":
            self.result.profile = self.profile(forward, workloads[0])
            return self.result
        timed = self.req.mode in ("benchmark", "submit") and self.device.type == "cuda"
        if timed:
            self.result.ceilings = self.req.ceilings or _measure_ceilings(self.device)
        faulted = None
        for w in workloads:
            if faulted:
                self.result.workloads.append(WorkloadResult(w.name, False, f"not run: {faulted}"))
                continue
            wr = self.check(forward, w)
            if wr.correct and timed:
                self.time(forward, w, wr)
            self.result.workloads.append(wr)
            if not wr.correct and self.device.type == "cuda" and _device_broken():
                faulted = f"the GPU context was lost during workload {w.name}"
        self.result.timed = timed
        return self.result

    def check(self, forward, w: Workload) -> WorkloadResult:
        inputs = self.inputs(w, "check")
        expected = as_tuple(self.baseline.forward(*[x.clone() for x in inputs]))
        try:
            outputs = as_tuple(forward(*inputs))
            if self.device.type == "cuda":
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            return WorkloadResult(w.name, False, f"forward raised:\n{short_traceback(exc)}")
        problem = check_contract(outputs, expected, self.task.outputs)
        if problem:
            return WorkloadResult(w.name, False, problem)
        checker = self.task.checker
        verdict = checker(outputs, expected, inputs) if checker else allclose_check(outputs, expected,
                                                                                     self.task.outputs)
        return WorkloadResult(w.name, verdict.ok, verdict.message, verdict.max_abs_err, verdict.max_rel_err)

    def time(self, forward, w: Workload, wr: WorkloadResult) -> None:
        from d2k_env.evaluator.timing import L2Flusher, graph_time, time_pair

        base_sets = [self.inputs(w, "time-baseline", i) for i in range(TIMED_SETS)]
        cand_sets = [self.inputs(w, "time-solution", i) for i in range(TIMED_SETS)]
        warm_b, warm_c = self.inputs(w, "warmup-baseline"), self.inputs(w, "warmup-solution")
        try:
            pair = time_pair(self.baseline.forward, forward, base_sets, cand_sets, warm_b, warm_c,
                             L2Flusher(self.device), budget_s=self.req.time_budget_s,
                             seed=derive_seed(self.req.seed, "bootstrap"))
        except BaseException as exc:  # noqa: BLE001
            wr.correct, wr.message = False, f"forward raised while being timed:\n{short_traceback(exc)}"
            return
        wr.baseline_ms, wr.solution_ms = pair.baseline.median_ms, pair.candidate.median_ms
        wr.baseline_spread, wr.solution_spread = pair.baseline.spread, pair.candidate.spread
        wr.speedup, wr.speedup_ci, wr.repetitions = pair.speedup, pair.speedup_ci, pair.repetitions
        c = self.result.ceilings
        wr.roofline_ms = self.task.roofline(w).floor_ms(c["bandwidth_gbs"], c["tflops"])
        wr.roofline_fraction = wr.roofline_ms / wr.solution_ms
        if w.launch_bound:
            wr.graph_baseline_ms = graph_time(self.baseline.forward, base_sets[0])
            wr.graph_solution_ms = graph_time(forward, cand_sets[0])

    def profile(self, forward, w: Workload) -> list[dict]:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        inputs = self.inputs(w, "profile")
        forward(*inputs)
        torch.cuda.synchronize()
        calls = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                forward(*inputs)
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            if e.device_type == DeviceType.CUDA:
                rows.append({"kernel": e.key, "calls": e.count // calls,
                             "us_per_call": e.device_time_total / calls})
        rows.sort(key=lambda r: -r["us_per_call"])
        return rows


def _triton_version() -> str:
    try:
        import triton
        return triton.__version__
    except ImportError:
        return "not installed"


def _device_broken() -> bool:
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - a sticky CUDA error: the context cannot run anything else
        return True


def _measure_ceilings(device: torch.device) -> dict[str, float]:
    from d2k_env.evaluator.timing import measure_ceilings
    return measure_ceilings(device)


def main() -> None:
    channel = os.fdopen(int(sys.argv[1]), "w")
    req = EvalRequest.from_json(sys.stdin.read())
    if req.device == "cpu":
        from d2k_env.evaluator import interpreter_patch
        interpreter_patch.apply()
    result = Worker(req).run()
    channel.write(json.dumps(result.to_dict()))
    channel.close()


if __name__ == "__main__":
    main()
