"""The evaluator: compiles, checks and times solution files, always in a child process.

Backends: ``cuda`` (the task's GPU workloads, timed), ``interpreter`` (Triton's CPU interpreter on
the task's smoke workloads; correctness only) and ``auto`` (``cuda`` when a GPU is visible).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import stat
import statistics
import shutil
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from d2k_env import tempdirs
from d2k_env.evaluator.baseline_check import BaselineTimes, agree, cache_key, suspect
from d2k_env.evaluator.gpu_lease import leased, physical_gpu
from d2k_env.evaluator.protocol import EvalRequest, EvalResult, Mode, WorkloadResult, derive_seed, inputs_key
from d2k_env.evaluator.recording import MAX_BYTES as MAX_RECORDING_BYTES
from d2k_env.evaluator.memcheck import ABSENT, MEMCHECK_EXIT, MemcheckTool, find_memcheck, first_report, never_attached
from d2k_env.evaluator.policy_service import check_solution, start as start_policy
from d2k_env.evaluator.rules import advice
from d2k_env.evaluator.cache_copy import harvest_cache, seed_cache
from d2k_env.evaluator.pool import MEMCHECK, WorkerPool
from d2k_env.evaluator.sandbox import MEMORY_LIMIT, PhaseLimits, Worker, WorkerOutcome, absent_layers
from d2k_env.task import Task

BACKENDS = ("auto", "cuda", "interpreter")
TIMED_MODES = ("benchmark", "submit", "profile")  # on the GPU: their solution run holds its GPU alone

__all__ = ["BACKENDS", "EvalResult", "Evaluator", "PhaseLimits", "WorkloadResult", "no_gpu_reason", "quick_backend",
           "resolve_backend"]


def resolve_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if backend == "auto":
        import torch
        return "cuda" if torch.cuda.is_available() else "interpreter"
    return backend


def quick_backend(backend: str) -> str:
    """:func:`resolve_backend`'s likely answer without importing torch (seconds): for ``auto``,
    ``cuda`` when :func:`no_gpu_reason` finds nothing missing. A caller that imports torch anyway
    confirms it with :func:`resolve_backend`."""
    if backend != "auto":
        return resolve_backend(backend)
    return "cuda" if no_gpu_reason() is None else "interpreter"


def no_gpu_reason() -> str | None:
    """Why this process has no GPU to evaluate on, in a few words, or ``None`` when the installed
    torch is a CUDA build (its ``libtorch_cuda``) and the CUDA driver counts a device this process
    may use (it honours ``CUDA_VISIBLE_DEVICES``). Read without importing torch; torch itself may
    still fail to use a device the driver counts."""
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return "torch is not installed"
    lib = Path(spec.origin).parent / "lib"
    if not any(lib.glob("libtorch_cuda*.so*")):
        return "the installed torch is a CPU-only build"
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver (libcuda.so.1 cannot be loaded)"
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return "the CUDA driver finds no GPU" + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else "")
    return None


class Evaluator:
    """Evaluates solution files for one task on one backend.

    Every evaluation: the static policy on the source (in a child process with a time limit;
    violations score 0 before anything runs),
    then a solution process (runs, times, saves outputs), then a check process that never sees the
    solution (expected outputs, comparison). ``cache_dir`` holds the Triton cache, so unchanged
    kernels are not recompiled between evaluations; ceilings (bandwidth, GEMM rate) measured by the
    first timed evaluation are reused by later ones. On the GPU a ``submit`` that passed runs its
    held-out shapes once more under compute-sanitizer's memcheck where the machine has it; there, a
    run that does not complete leaves the submission unpaid (``memcheck=False`` skips the run; every
    GPU result's ``sandbox["memcheck"]`` says whether it ran and how it ended).

    Workers come from ``pool`` (a :class:`~d2k_env.evaluator.pool.WorkerPool` of the same backend,
    shared with other evaluators of the calling thread: an evaluation service's lane), or from a
    pool of its own, with warm spares when ``spares=True`` (see the pool for what a spare is and
    where spares are kept). Each worker serves one evaluation, whichever pool it came from. ``gpu``
    (the workers' ``CUDA_VISIBLE_DEVICES``: one index or UUID as the caller's driver names it)
    pins the evaluations to one GPU; it must match the pool's. ``close()`` ends the spares of its
    own pool; they never outlive the evaluator, the thread that started them, or the process.

    On the GPU every phase holds its GPU's machine-wide lease (:mod:`~d2k_env.evaluator.gpu_lease`,
    files in ``lease_dir``): the solution run of a timed mode exclusively, the untimed runs shared;
    the result's ``lease`` lists what each phase held and how long it waited. ``take_leases=False``
    is for a caller that holds the lease for the whole evaluation itself (an evaluation service's
    lane). Each timed baseline median is checked against its roofline floor and this device's
    earlier medians in ``baseline_times`` (a :class:`~d2k_env.evaluator.baseline_check.BaselineTimes`;
    default: the user's cache file) and re-measured once when off; the workload's ``baseline_note``
    says so.
    """

    def __init__(self, task: Task, backend: str = "auto", cache_dir: str | Path | None = None,
                 limits: PhaseLimits | None = None, time_budget_s: float = 3.0, memcheck: bool = True,
                 spares: bool = False, gpu: str | None = None, pool: WorkerPool | None = None,
                 lease_dir: str | Path | None = None, take_leases: bool = True,
                 baseline_times: BaselineTimes | None = None):
        self.task = task
        self.backend = resolve_backend(backend)
        if pool is not None and (pool.interpret != (self.backend == "interpreter") or pool.gpu != gpu):
            raise ValueError(f"the worker pool serves {'the interpreter' if pool.interpret else 'the GPU'} "
                             f"(gpu {pool.gpu!r}), not this evaluator's {self.backend} backend (gpu {gpu!r})")
        self._own_cache = None if cache_dir else tempdirs.make("triton")
        self.cache_dir = Path(cache_dir or self._own_cache.name)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.limits = limits or PhaseLimits()
        self.time_budget_s = time_budget_s
        self.ceilings: dict[str, float] | None = None
        self.memcheck = memcheck
        self.gpu = gpu
        self.lease_dir = Path(lease_dir) if lease_dir is not None else None
        self.take_leases = take_leases
        self._lease_key: str | None = None
        self.baseline_times = baseline_times if baseline_times is not None else BaselineTimes()
        self._own_pool = pool is None
        self.pool = pool or WorkerPool(interpret=self.backend == "interpreter", gpu=gpu, spares=spares)
        start_policy()  # the policy's child imports torch while nothing is asked of it yet
        _say_absent_layers()

    @property
    def spares(self) -> bool:
        """Whether its evaluations take warm spares (False where the machine cannot keep them)."""
        return self.pool.spares

    @property
    def can_time(self) -> bool:
        return self.backend == "cuda"

    @property
    def workloads(self):
        """The workloads this backend evaluates: the GPU ones, or the small smoke ones."""
        return self.task.workloads if self.can_time else self.task.smoke_workloads

    def evaluate(self, solution_path: str | Path, mode: Mode = "test", workloads: list[str] | None = None,
                 seed: int | None = None) -> EvalResult:
        """Evaluate ``solution_path``. ``seed`` defaults to a fresh secret one."""
        names = workloads or [w.name for w in self.workloads]
        if mode == "profile" and not self.can_time:
            return EvalResult(mode, self.backend, error="profiling needs a GPU: the interpreter backend "
                                                        "runs kernels on the CPU and cannot time them")
        try:
            source = read_solution(solution_path)
        except UnreadableSolution as exc:
            return EvalResult(mode, self.backend, error=str(exc))
        solution_path = Path(solution_path).resolve()
        violations = check_solution(source, self.task.allowed_torch)
        if violations:
            # Each rule broken also says what an honest solution does instead, once.
            return EvalResult(mode, self.backend, error="[policy] solution.py breaks the rules; nothing was run:\n"
                                                        + "\n".join(map(str, violations)) + "\n"
                                                        + advice(v.rule for v in violations))
        # Each worker reads the task from a fresh private copy. The solution process draws its inputs
        # from a recording key: the inputs key, which draws every checked and timed input, never
        # reaches it.
        seed = secrets.randbits(63) if seed is None else seed
        # A submission is also checked on held-out shapes of the task's family, drawn from its secret seed.
        heldout = [{"name": w.name, "params": w.params} for w in
                   self.task.heldout_workloads(derive_seed(seed, "heldout"), smoke=not self.can_time)
                   ] if mode == "submit" else []
        req = EvalRequest(task_id=self.task.id, root="", solution_path=str(solution_path), solution_source=source,
                          mode=mode, device="cuda" if self.can_time else "cpu", workloads=names,
                          smoke=not self.can_time, seed=derive_seed(seed, "record"), time_budget_s=self.time_budget_s,
                          ceilings=self.ceilings, heldout=heldout, nonce=secrets.token_hex(16))
        timed = self.can_time and mode in TIMED_MODES
        leases: list[dict] = []
        with self._lease("solution", mode == "profile" and timed, leases):
            result, solution = self._run(req)
        recordings = tempdirs.make("recordings")
        memchecking = None
        try:
            _keep(solution.outputs_dir, Path(recordings.name))
            solution.close()
            if result.error is None and mode != "profile" and any(w.correct for w in result.workloads):
                # The trusted side: the recordings replayed on the secret inputs (timed when the mode is),
                # then the check of the replay's outputs.
                recorded = {w.name for w in result.workloads if w.correct}
                replay_req = dataclasses.replace(
                    req, role="replay", seed=inputs_key(seed), nonce=secrets.token_hex(16),
                    workloads=[n for n in names if n in recorded], heldout=[w for w in heldout if w["name"] in recorded])
                if timed:
                    self.pool.wait_warm()  # nothing beside a timed run: a spare still starting up would be
                with self._lease("replay", timed, leases):
                    replayed, replayer = self._run(replay_req, outputs=Path(recordings.name), copy=True)
                try:
                    result = merge_replay(result, replayed)
                    if timed and result.error is None:
                        self._revalidate_baselines(replay_req, result, leases, Path(recordings.name))
                    if self._memcheck_due(req, result):
                        memchecking = self._start_memcheck(replay_req, leases, Path(recordings.name))
                    if result.error is None and any(w.correct for w in result.workloads):
                        passed = {w.name for w in result.workloads if w.correct}
                        with self._lease("check", False, leases):
                            check, checker = self._run(dataclasses.replace(
                                replay_req, role="check", nonce=secrets.token_hex(16),
                                workloads=[n for n in replay_req.workloads if n in passed],
                                heldout=[w for w in replay_req.heldout if w["name"] in passed]),
                                outputs=replayer.outputs_dir)
                        checker.close()
                        result = merge_check(result, check)
                finally:
                    replayer.close()
        finally:
            solution.close()
            memchecked = _outcome_of(memchecking)
            recordings.cleanup()
        # Once the published shapes pass: a stray store may also have made a held-out shape wrong,
        # and the checker's verdict names the cause.
        if memchecked is not None and self._memcheck_due(req, result):
            result = self._memcheck_verdict(req, result, memchecked)
        elif self.can_time and "memcheck" not in result.sandbox:
            result.sandbox["memcheck"] = _memcheck_not_due(req, result)
        held = {w["name"] for w in heldout}
        for w in result.workloads:
            w.heldout = w.name in held
        if result.ceilings and self.ceilings is None:
            self.ceilings = result.ceilings
        result.lease = leases
        self.pool.replenish()
        return result

    def _lease(self, phase: str, exclusive: bool, record: list[dict]):
        """The GPU's machine-wide lease for ``phase`` (exclusive for a timed run), recorded in
        ``record``; nothing on the interpreter, or where the caller holds the lease itself."""
        if not (self.can_time and self.take_leases):
            return nullcontext()
        if self._lease_key is None:
            self._lease_key = physical_gpu(self.gpu)
        return leased(self._lease_key, exclusive, phase, record, self.lease_dir)

    def _revalidate_baselines(self, req: EvalRequest, result: EvalResult, leases: list[dict],
                              recordings: Path) -> None:
        """Check each timed baseline median against its roofline floor and this device's earlier
        medians; re-measure the suspect workloads once (a benchmark run of those alone, under the
        exclusive lease) and take that run's times (and its verdict, should it fail there). A time
        believed (first or re-measured, or two that agree with each other) enters the cache."""
        keys, reasons = {}, {}
        for w in result.workloads:
            if w.baseline_ms is None or not w.correct:
                continue
            keys[w.name] = cache_key(result.device_name, result.versions.get("torch", "?"), self.task.id, w.name)
            if why := suspect(w.baseline_ms, self._floor_ms(w.name, result.ceilings),
                              self.baseline_times.earlier(keys[w.name])):
                reasons[w.name] = why
            else:
                self.baseline_times.record(keys[w.name], w.baseline_ms)
        if not reasons:
            return
        again_req = dataclasses.replace(req, mode="benchmark", workloads=[n for n in req.workloads if n in reasons],
                                        heldout=[], nonce=secrets.token_hex(16), ceilings=result.ceilings)
        with self._lease("re-measure", True, leases):
            again, worker = self._run(again_req, outputs=recordings, copy=True)
        worker.close()
        fresh = {w.name: w for w in again.workloads} if again.error is None else {}
        for w in result.workloads:
            if w.name not in reasons:
                continue
            first, second = w.baseline_ms, fresh.get(w.name)
            if second is None or not second.correct or second.baseline_ms is None:
                why = again.error or (second.message if second is not None else "no result for it")
                w.correct, w.message = False, f"baseline re-measure failed: {why}"
                w.baseline_note = f"re-measured because {reasons[w.name]}; the re-measured run failed"
                continue
            for field in ("baseline_ms", "solution_ms", "baseline_spread", "solution_spread", "repetitions",
                          "speedup", "speedup_ci", "roofline_ms", "roofline_fraction", "graph_solution_ms",
                          "graph_baseline_ms"):
                setattr(w, field, getattr(second, field))
            earlier = self.baseline_times.earlier(keys[w.name])
            still = suspect(second.baseline_ms, self._floor_ms(w.name, result.ceilings), earlier)
            usual = statistics.median(earlier) if earlier else None
            if still is None:
                self.baseline_times.record(keys[w.name], second.baseline_ms)
                outcome = f"re-measured {second.baseline_ms:.4f} ms"
            elif usual is not None and second.baseline_ms < usual and agree(first, second.baseline_ms) and \
                    "roofline" not in still:
                # Two runs agree on a faster baseline than the cache's: the cache was slow (it may
                # have been filled under load). A slower one is never adopted: a solution can slow
                # the baseline, never speed it up.
                self.baseline_times.record(keys[w.name], second.baseline_ms, restart=True)
                outcome = (f"re-measured {second.baseline_ms:.4f} ms, which agrees with the first run: the "
                           f"earlier medians were replaced")
            elif usual is not None and second.baseline_ms > usual:
                # Still slower than this device's baseline runs: never pay more than they support.
                scale = usual / second.baseline_ms
                w.speedup *= scale
                w.speedup_ci = (w.speedup_ci[0] * scale, w.speedup_ci[1] * scale) if w.speedup_ci else None
                outcome = (f"re-measured {second.baseline_ms:.4f} ms, still off: {still}; the speedup is taken "
                           f"against the earlier median ({w.speedup:.3f}x)")
            else:
                outcome = f"re-measured {second.baseline_ms:.4f} ms, still off: {still}"
            w.baseline_note = f"re-measured because {reasons[w.name]}; {outcome}"

    def _floor_ms(self, name: str, ceilings: dict[str, float] | None) -> float | None:
        """The roofline floor of published workload ``name`` under ``ceilings`` (None without them)."""
        if not ceilings:
            return None
        try:
            workload = self.task.workload(name)
        except KeyError:
            return None
        return self.task.roofline(workload).floor_ms(ceilings["bandwidth_gbs"], ceilings["tflops"])

    def _run(self, req: EvalRequest, outputs: Path | None = None, copy: bool = False) -> tuple[EvalResult, Worker]:
        """Run ``req`` on a worker of its role (see :meth:`_take_and_run`); returns the result and the
        worker, whose directory the caller removes (``close()``) once done with its outputs."""
        req, outcome, worker = self._take_and_run(req.role, req, outputs, copy=copy)
        return self._result(req, outcome), worker

    def _take_and_run(self, kind: str, req: EvalRequest, outputs: Path | None = None,
                      taken: tuple[Worker, bool] | None = None, copy: bool = False
                      ) -> tuple[EvalRequest, WorkerOutcome, Worker]:
        """Run ``req`` (its ``root`` and ``outputs_dir`` become the worker's) on a worker of ``kind``
        from the pool (or on ``taken``, the pool's answer already had); the files in ``outputs`` (the
        recordings for a replay, the replay's outputs for the check) are moved, or with ``copy``
        copied, into its outputs directory first. Returns the request as run, its outcome and the worker."""
        worker, spare = taken or self.pool.take(kind)
        try:
            req, outcome = self._dispatch(worker, req, outputs, copy)
            if spare and not outcome.began:
                # The spare ended before its channel carried anything (it died after the pool's check,
                # before or while taking the request, or while still warming up): nothing of the
                # request ran, so this is no verdict on the solution. Once more, on a fresh worker.
                stale, worker = worker, self.pool.start(kind)
                try:
                    req, outcome = self._dispatch(worker, req, outputs if copy else
                                                  stale.outputs_dir if outputs is not None else None, copy)
                finally:
                    stale.close()
        except BaseException:
            worker.close()
            raise
        return req, outcome, worker

    def _dispatch(self, worker: Worker, req: EvalRequest, outputs: Path | None,
                  copy: bool = False) -> tuple[EvalRequest, WorkerOutcome]:
        """Fill the worker's directories (the task's snapshot; the Triton cache of its side of the
        boundary; the entries of ``outputs``, moved, or copied with ``copy``), point ``req`` at them
        and run it; the cache entries the worker made come back. Returns the request as run and the
        outcome."""
        snapshot_task(self.task, worker.task_dir)
        cache = self._cache_for(req.role)
        seed_cache(cache, worker.triton_cache)
        if outputs is not None:
            for entry in os.scandir(outputs):
                if copy:
                    shutil.copyfile(entry.path, worker.outputs_dir / entry.name)
                else:
                    os.rename(entry.path, worker.outputs_dir / entry.name)
        req = dataclasses.replace(req, root=str(worker.task_dir), outputs_dir=str(worker.outputs_dir))
        outcome = worker.run(req, self.limits)
        harvest_cache(worker.triton_cache, cache)
        return req, outcome

    def _cache_for(self, role: str) -> Path:
        """The Triton cache of ``role``'s side of the boundary: the solution process's, which it may
        fill with anything, is never the one the trusted side compiles into and loads from."""
        return self.cache_dir / ("solution" if role == "solution" else "trusted")

    def _result(self, req: EvalRequest, outcome: WorkerOutcome) -> EvalResult:
        """The worker's outcome as a result: its death named, or its report, checked."""
        if outcome.result is None:
            result = EvalResult(req.mode, self.backend, error=_death(req, outcome))
        else:
            result = self._read_result(req, outcome.result)
            if not (req.role == "replay" and req.mode in ("benchmark", "submit") and self.can_time):
                # Timings come only from the trusted side's timed run: whatever else reached a channel is void.
                result.timed = False
                for w in result.workloads:
                    w.speedup = w.speedup_ci = w.solution_ms = w.baseline_ms = None
        result.output = outcome.output
        result.sandbox = _layers(outcome, result)
        result.queue, result.lease = {}, []  # the service's and the evaluator's to say, never the worker's
        for w in result.workloads:
            w.baseline_note = None
            if req.role != "replay":  # design-property findings are the trusted replay's alone
                w.properties = {}
        return result

    def _memcheck_due(self, req: EvalRequest, result: EvalResult) -> bool:
        """Whether ``result`` (the solution run's, or the checked one) calls for the memory-checked run:
        a GPU submission with held-out shapes, no error, and every published shape correct."""
        held = {w["name"] for w in req.heldout}
        return req.mode == "submit" and self.can_time and bool(req.heldout) and result.error is None and \
            all(w.correct for w in result.workloads if w.name not in held)

    def _start_memcheck(self, req: EvalRequest, leases: list[dict], recordings: Path) -> "Future | str | MemcheckFailed":
        """The held-out shapes once more, under the GPU memory checker, started on a thread of its own:
        a future of the run (see :meth:`_run_memcheck`), the sandbox note saying why none runs (no
        tool, or switched off), or :class:`MemcheckFailed` when the machine has the tool and its run
        could not start."""
        tool = find_memcheck() if self.memcheck else None
        if tool is None:
            return ABSENT if self.memcheck else "off: Evaluator(memcheck=False)"
        checked = dataclasses.replace(req, mode="test", workloads=[], memcheck=True, nonce=secrets.token_hex(16))
        try:
            self.pool.keep_memcheck(tool)
            # Taken on this thread: a spare started by exec serves only the thread that started it.
            taken = self.pool.take(MEMCHECK)
        except Exception as exc:  # noqa: BLE001 - a check that cannot start is a verdict, not a crash
            return MemcheckFailed(tool, f"its worker could not start ({type(exc).__name__}: {exc})")
        executor = ThreadPoolExecutor(1, thread_name_prefix="d2k-memcheck")
        try:
            return executor.submit(self._run_memcheck, tool, checked, taken, leases, recordings)
        finally:
            executor.shutdown(wait=False)  # its thread ends with the run

    def _run_memcheck(self, tool: MemcheckTool, checked: EvalRequest, taken: tuple[Worker, bool],
                      leases: list[dict], recordings: Path) -> "tuple | MemcheckFailed":
        started = time.monotonic()
        try:
            with self._lease("memcheck", False, leases):
                checked, outcome, worker = self._take_and_run(MEMCHECK, checked, recordings, taken=taken, copy=True)
        except Exception as exc:  # noqa: BLE001 - as in _start_memcheck
            taken[0].close()
            return MemcheckFailed(tool, f"its run raised ({type(exc).__name__}: {exc})")
        worker.close()
        run = self._read_result(checked, outcome.result) if outcome.result is not None else None
        return tool, checked, outcome, run, time.monotonic() - started

    def _memcheck_verdict(self, req: EvalRequest, result: EvalResult,
                          memchecked: "tuple | str | MemcheckFailed") -> EvalResult:
        """The memory-checked run's verdict on ``result``: an invalid access (named on the held-out shape
        it broke, over any wrong values there), or a run that does not end cleanly under it (the
        solution could have killed it), scores 0. Where the machine has the tool and its run did not
        complete (it could not start, could not attach, crashed or ran out of time), the check that
        should have run did not: that scores 0 too (fails closed), saying so. A note alone where the
        machine has no checker or the caller switched it off."""
        if isinstance(memchecked, str):
            result.sandbox["memcheck"] = memchecked
            return result
        if isinstance(memchecked, MemcheckFailed):
            return _memcheck_failed(req, result, memchecked.tool, memchecked.why)
        tool, checked, outcome, run, seconds = memchecked
        layers = _layers(outcome, run)
        # The tool's own exit (a positive status: a signal would mean it was killed) with its own words.
        if outcome.returncode not in (None, 0, MEMCHECK_EXIT) and outcome.returncode > 0 and \
                never_attached(outcome.memcheck_log):
            return _memcheck_failed(req, result, tool, "it could not attach to the worker inside the sandbox "
                                                       f"(exit status {outcome.returncode})")
        summary = (f"compute-sanitizer {tool.version} memcheck on the held-out shapes, {seconds:.1f} s, under "
                   + "; ".join(f"{k}: {v}" for k, v in layers.items()))
        if problem := memcheck_problem(checked, outcome, run):
            failed = [w.name for w in (run.workloads if run else []) if not w.correct]
            held = [w for w in result.workloads if w.name in {h["name"] for h in req.heldout}]
            target = next((w for w in held if w.name in failed), held[0])
            target.correct, target.message = False, problem
            ended = outcome.returncode == MEMCHECK_EXIT or (run is not None and outcome.returncode == 0)
            result.sandbox["memcheck"] = f"{'ran, found a problem' if ended else 'did not complete'}: {summary}"
        else:
            result.sandbox["memcheck"] = f"ran, clean: {summary}"
        return result

    def _read_result(self, req: EvalRequest, data: dict) -> EvalResult:
        """The worker's result, if it is well-formed and covers exactly the workloads asked for."""
        try:
            result = EvalResult.from_dict(data)
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            return EvalResult(req.mode, self.backend, error=f"[forged-result] a malformed result ({exc!r})")
        asked = req.workloads + [w["name"] for w in req.heldout]
        if result.error is None and req.mode != "profile" and [w.name for w in result.workloads] != asked:
            return EvalResult(req.mode, self.backend,
                              error="[forged-result] the result does not cover exactly the workloads asked for")
        return result

    def close(self) -> None:
        """Take down and remove the spares of its own pool (none starts after this) and the Triton
        cache this evaluator made."""
        if self._own_pool:
            self.pool.close()
        if self._own_cache is not None:
            self._own_cache.cleanup()


class MemcheckFailed:
    """The memory-checked run on a machine with the tool did not complete: ``why``."""

    def __init__(self, tool: MemcheckTool, why: str):
        self.tool, self.why = tool, why


def _outcome_of(memchecking: "Future | str | MemcheckFailed | None") -> "tuple | str | MemcheckFailed | None":
    """What the memory-checked run came to: its future's value (an exception in it: a failed run)."""
    if not isinstance(memchecking, Future):
        return memchecking
    try:
        return memchecking.result()
    except Exception as exc:  # noqa: BLE001 - the run's own errors are caught in it; this is the rest
        return MemcheckFailed(find_memcheck(), f"its run raised ({type(exc).__name__}: {exc})")


def _memcheck_failed(req: EvalRequest, result: EvalResult, tool: MemcheckTool | None, why: str) -> EvalResult:
    """A submission whose memory-checked run did not complete, on a machine with the tool: not paid.
    Its first held-out shape carries the verdict (the solution may be blameless: the check failed)."""
    version = tool.version if tool is not None else "(version unknown)"
    message = (f"memory check incomplete: the held-out shapes' run under compute-sanitizer {version} memcheck did "
               f"not complete: {why}. This machine has the memory checker, so a submission it could not "
               f"check is not paid (this may be the harness's fault, not the solution's: submit again)")
    result.sandbox["memcheck"] = f"did not complete: {why}"
    held = [w for w in result.workloads if w.name in {h["name"] for h in req.heldout}]
    if held:
        held[0].correct, held[0].message = False, message
    else:
        result.error = message
    return result


def _memcheck_not_due(req: EvalRequest, result: EvalResult) -> str:
    """The memory check's state on a GPU result whose held-out shapes were not memory-checked."""
    if req.mode != "submit":
        return f"not run: only a submission's held-out shapes are memory-checked (this was {req.mode})"
    if not req.heldout:
        return "not run: this submission has no held-out shapes"
    return "not run: the submission already failed (its error or a published shape decides the verdict)"


_absent_said = False


def _say_absent_layers() -> None:
    """Once per process, at the first evaluator: the sandbox layers this machine lacks."""
    global _absent_said
    if not _absent_said:
        _absent_said = True
        for layer in absent_layers():
            warnings.warn(f"d2k-env sandbox: {layer}; each result's 'sandbox' names the layers that were active",
                          RuntimeWarning, stacklevel=3)


def _layers(outcome: WorkerOutcome, run: EvalResult | None) -> dict[str, str]:
    """The sandbox's layers of one worker: the supervisor's report, and seccomp, which the worker
    installs itself and reports in its own result (absent when it delivered none)."""
    return {**outcome.layers, **{k: v for k, v in (run.sandbox if run else {}).items() if k == "seccomp"}}


def _death(req: EvalRequest, outcome: WorkerOutcome) -> str:
    """Why a worker delivered no result, named: a limit the harness enforced, memory, a signal, an exit."""
    who = {"solution": "the evaluation", "replay": "the replay of the recorded kernels"}.get(
        req.role, "the check of the saved outputs")
    if outcome.stopped:
        return f"{who} was killed: {outcome.stopped}"
    if outcome.oom_kills or "MemoryError" in outcome.output or "can't allocate memory" in outcome.output:
        return (f"[memory] {who} ran out of memory (limit {MEMORY_LIMIT / 2**30:.0f} GiB per evaluation; exit "
                f"status {_exit_status(outcome.returncode)})")
    return f"{who} process died (exit status {_exit_status(outcome.returncode)}) before reporting"


def memcheck_problem(req: EvalRequest, outcome: WorkerOutcome, run: EvalResult | None) -> str | None:
    """The verdict of a run under the memory checker, or None when it ran clean. Its exit status
    decides (the solution, a process below it, cannot set it); its log only gives the message."""
    if outcome.returncode == MEMCHECK_EXIT:
        report = first_report(outcome.memcheck_log)
        return f"[out-of-bounds] compute-sanitizer memcheck on the held-out shapes: {report}"
    if run is None or outcome.returncode != 0:
        why = _death(req, outcome) if run is None else f"exit status {_exit_status(outcome.returncode)}"
        return f"the held-out shapes did not run to the end under compute-sanitizer memcheck ({why})"
    if not run.correct:
        wrong = next((f"{w.name}: {w.message}" for w in run.workloads if not w.correct), run.error)
        return f"under compute-sanitizer memcheck, {wrong}"
    return None


def _exit_status(returncode: int | None) -> str:
    """``-11 (SIGSEGV)`` for a process a signal ended, else the code itself."""
    if returncode is not None and returncode < 0:
        try:
            return f"{returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            pass
    return str(returncode)


class UnreadableSolution(ValueError):
    """solution.py is not a regular file that can be read."""


def read_solution(path: str | Path) -> str:
    """The text of the solution file at ``path``. Only a regular file is read (a link could name the
    reference, a pipe would block here); anything else raises :class:`UnreadableSolution`."""
    try:
        kind = os.lstat(path).st_mode
    except OSError as exc:
        raise UnreadableSolution(f"solution.py cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(kind):
        raise UnreadableSolution("solution.py must be a regular file, not a link, a directory or a pipe")
    return Path(path).read_text(errors="replace")


def _keep(directory: Path, into: Path) -> None:
    """Move the recordings the solution process left in ``directory`` into ``into`` (the evaluator's
    own), each a regular file no larger than a recording may be; anything else stays and is removed
    with the worker."""
    for entry in os.scandir(directory):
        if entry.name.endswith("-recording.pt") and entry.is_file(follow_symlinks=False) and \
                entry.stat(follow_symlinks=False).st_size <= MAX_RECORDING_BYTES:
            os.rename(entry.path, into / entry.name)


def snapshot_task(task: Task, into: Path) -> Path:
    """Copy what a worker needs of the task, its spec and baseline (never the reference: a worker
    that could read it could run it), under ``into``, an empty or absent directory (a worker's task
    directory, empty since it started); returns ``into``."""
    if into.exists() and any(into.iterdir()):
        raise ValueError(f"{into} is not empty: a task snapshot goes into an empty directory")
    for path in (task.spec_path, task.baseline_path):
        target = into / path.relative_to(task.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return into


def merge_replay(result: EvalResult, replayed: EvalResult) -> EvalResult:
    """The solution run's result (its own failures, and which workloads it recorded) with each recorded
    workload's verdict and timings taken from the trusted replay; ceilings too. Nothing the solution
    process claimed beyond its failures survives."""
    if replayed.output:  # what the kernels printed (the interpreter runs device_print and print there)
        result.output = "\n".join(filter(None, [result.output, "[printed while the kernels were replayed]",
                                                 replayed.output]))
    if replayed.error is not None:
        result.error = replayed.error
        return result
    verdicts = {w.name: w for w in replayed.workloads}
    for i, w in enumerate(result.workloads):
        if not w.correct:
            continue
        v = verdicts.get(w.name)
        result.workloads[i] = v if v is not None else WorkloadResult(
            w.name, False, "not replayed: the replay returned no verdict for it")
    result.ceilings, result.timed, result.device_name = replayed.ceilings, replayed.timed, replayed.device_name
    result.versions = replayed.versions or result.versions
    result.sandbox = {**result.sandbox, **{f"replay {k}": v for k, v in replayed.sandbox.items()}}
    return result


def merge_check(result: EvalResult, check: EvalResult) -> EvalResult:
    """The solution run's result with each workload's correctness taken from the check process."""
    if check.error is not None:
        result.error = check.error
        return result
    verdicts = {w.name: w for w in check.workloads}
    for w in result.workloads:
        v = verdicts.get(w.name)
        if w.correct and v is None:  # only the check process can say a workload is correct
            w.correct, w.message = False, "not verified: the check process returned no verdict for it"
        elif w.correct:
            w.correct, w.message, w.max_abs_err, w.max_rel_err = v.correct, v.message, v.max_abs_err, v.max_rel_err
    return result
