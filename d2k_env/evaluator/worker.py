"""Evaluation workers: each runs in a child process, one evaluation per process.

Usage (by the supervisor, :mod:`d2k_env.evaluator.reaper`, only): ``python -m d2k_env.evaluator.worker
FD processes|no-processes`` with the JSON :class:`EvalRequest` on stdin, which the worker reads only
once it is warm (see :func:`prepare` and :func:`warm_device`): a spare waits there, and an empty
stdin ends it unused. (A worker forked by the fork server runs :func:`serve` the same way.)
Progress and the result are JSON lines on file descriptor FD, the harness's own channel: whatever
the solution prints goes to stdout/stderr and never counts.

Two roles, two processes:

- ``solution`` imports the solution (after the harness's guards are in place), runs it on each
  workload's check inputs, times it against the baseline, and saves its outputs;
- ``check`` never imports the solution: it regenerates the same inputs, computes the baseline's
  expected outputs and compares. Expected outputs never exist where the solution runs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import linecache
import os
import sys
import threading
import traceback
import warnings
from pathlib import Path
from types import ModuleType

import torch

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.confine import seccomp
from d2k_env.evaluator.baseline_check import ROOFLINE_SLACK
from d2k_env.evaluator.guard_bands import GuardBand, band_problem, guard_inputs
from d2k_env.evaluator.guards import LaunchCounter, TorchWorkGuard, harness_fingerprint, output_problems
from d2k_env.evaluator.kept_state import kept_tensors, state_fingerprint
from d2k_env.evaluator.l2_state import access_policy_window_bytes, release_persisting_l2
from d2k_env.evaluator.protocol import EvalRequest, EvalResult, WorkloadResult, derive_seed
from d2k_env.evaluator.source_text import kernel_source_problem, tokenizer_lines
from d2k_env.task import Task, Workload, load_snapshot

TIMED_SETS = 3
# Share of the solution's GPU time that must be spent in its own Triton kernels. Allocation
# launches no kernels, so an honest solution sits near 100%; the slack admits a zero-fill of an
# accumulator. A solution doing its work in torch ops lands far below.
MIN_OWN_KERNEL_SHARE = 0.75
# A time below the roofline floor is impossible; the floor comes from ceilings measured on the
# machine (best of 20), whose noise is a few percent, so only times 10% under it are rejected
# (ROOFLINE_SLACK, the same slack the evaluator allows a baseline's time).


def load_module(path: str, name: str, source: str | None = None) -> ModuleType:
    """Runs ``source`` (default: the text at ``path``) as a new module named after ``path``.

    Never a cached .pyc beside the file, and, given ``source``, never what the file holds now:
    the text goes into linecache too, so Triton compiles kernels from the very text that ran.
    """
    if source is None:
        source = Path(path).read_text()
    lines = tokenizer_lines(source)  # the compiler's line numbers; str.splitlines cuts at \x0c, \x1c, ...
    linecache.cache[path] = (len(source), None, lines, path)  # mtime None: never reloaded from disk
    module = ModuleType(name)
    module.__file__ = path
    # Registered while it runs, as an import would: dataclasses and typing look their module up
    # by name (a @dataclass under `from __future__ import annotations` fails to load otherwise).
    sys.modules[name] = module
    exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    return module


def short_traceback(exc: BaseException, limit_chars: int = 3000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit_chars else "...\n" + text[-limit_chars:]


def out_of_memory(exc: BaseException) -> str:
    """``[memory] ...`` when ``exc`` says the process hit its memory limit, else nothing."""
    if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) or "out of memory" in str(exc).lower():
        return "[memory] the evaluation ran out of memory: "
    return ""


def outputs_file(req: EvalRequest, workload: str, kind: str) -> Path:
    return Path(req.outputs_dir) / f"{hashlib.sha256(workload.encode()).hexdigest()[:16]}-{kind}.pt"


def moved(t: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with the same shape and strides (the checker checks the layout;
    .to() would make a strided view contiguous), whose storage holds only the elements the view
    spans (torch.save writes a whole storage: a small view of a huge one would flood the disk)."""
    t = t.detach()
    if not t.numel():
        return t.to(device)
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    span = torch.as_strided(t, (extent,), (1,)).to(device, copy=True)
    return torch.as_strided(span, t.shape, t.stride())


def portable(outputs: tuple) -> list[torch.Tensor]:
    """Host copies of the outputs for the checker (see moved)."""
    return [moved(o, "cpu") for o in outputs]


class Channel:
    """JSON lines to the supervisor, which stamps them for the env: phase changes (for per-phase
    time limits), then the result."""

    def __init__(self, fd: int):
        self.f = os.fdopen(fd, "w")

    def phase(self, phase: str, workload: str = "") -> None:
        self.f.write(json.dumps({"phase": phase, "workload": workload}) + "\n")
        self.f.flush()

    def result(self, result: dict) -> None:
        self.f.write(json.dumps({"result": result}) + "\n")
        self.f.close()


class Run:
    def __init__(self, req: EvalRequest, channel: Channel):
        self.req, self.channel = req, channel
        self.task: Task = load_snapshot(req.task_id, req.root)
        self.device = torch.device("cuda" if req.device == "cuda" else "cpu")
        self.baseline = load_module(str(self.task.baseline_path), "d2k_baseline")
        self.result = EvalResult(mode=req.mode, backend="cuda" if req.device == "cuda" else "interpreter",
                                 versions={"torch": torch.__version__, "triton": _triton_version(),
                                           "python": sys.version.split()[0]})
        if self.device.type == "cuda":
            self.result.device_name = torch.cuda.get_device_name(self.device)
        self.workloads = [self.task.workload(n, smoke=req.smoke) for n in req.workloads] + \
            [Workload(w["name"], w["params"], heldout=True) for w in req.heldout]

    def inputs(self, w: Workload, *role: object) -> tuple:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(derive_seed(self.req.seed, self.task.id, w.name, *role))
        return self.task.make_inputs(w, gen, self.device)

    def guarded_inputs(self, w: Workload, *role: object) -> tuple[tuple, list[GuardBand]]:
        """The solution's inputs, each inside guard bands (a pattern drawn from the inputs key), and the bands."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(derive_seed(self.req.seed, "guard-bands", self.task.id, w.name, *role))
        names = list(inspect.signature(self.baseline.forward).parameters)
        return guard_inputs(self.inputs(w, *role), names, gen)


class SolutionRun(Run):
    def run(self) -> EvalResult:
        self.channel.phase("load")
        self.guard = TorchWorkGuard(self.task.allowed_torch)
        self.launches = LaunchCounter(self.req.solution_path, self.guard)
        self.launches.install()
        if self.device.type == "cuda":
            torch.zeros(1, device=self.device)  # creates the context whose set-aside is released
            release_persisting_l2()
            self.launches.window_at_start = access_policy_window_bytes(torch.cuda.current_stream())
        fingerprint_now = _run_fingerprint  # a local: the solution cannot rebind it
        fingerprint = fingerprint_now()
        self.threads = set(threading.enumerate())
        self.first_state: dict[str, str] = {}  # per workload: the module state digest after its first call
        try:
            solution = self.module = load_module(self.req.solution_path, "solution", self.req.solution_source)
            forward = getattr(solution, "forward", None)
            if not callable(forward):
                raise AttributeError("solution.py must define a function forward(*inputs)")
        except BaseException as exc:  # noqa: BLE001 - anything the solution does at import is its fault
            self.result.error = f"{out_of_memory(exc)}solution.py failed to load:\n{short_traceback(exc)}"
            return self.result
        if problem := kernel_source_problem(self.req.solution_source, self.req.solution_path):
            self.result.error = problem  # a kernel would compile from other text than the policy checked
            return self.result
        if self.req.mode == "profile":
            self.channel.phase("profile", self.workloads[0].name)
            self.result.profile = self.profile(forward, self.workloads[0])
            return self.result
        if self.device.type == "cuda":
            self.launches.stream = torch.cuda.current_stream()
            self.launches.watch_l2 = True
        timed = self.req.mode in ("benchmark", "submit") and self.device.type == "cuda"
        if timed:
            self.channel.phase("ceilings")
            self.result.ceilings = self.req.ceilings or _measure_ceilings(self.device)
        faulted = None
        for w in self.workloads:
            if faulted:
                self.result.workloads.append(WorkloadResult(w.name, False, f"not run: {faulted}"))
                continue
            self.channel.phase("check", w.name)
            wr = self.run_check_inputs(forward, w)
            if wr.correct and timed and not w.heldout:
                self.channel.phase("time", w.name)
                self.time(forward, w, wr)
            self.result.workloads.append(wr)
            if not wr.correct and self.device.type == "cuda" and _device_broken():
                faulted = f"the GPU context was lost during workload {w.name}"
        if fingerprint_now() != fingerprint:
            self.result.error = "[tampering] the solution replaced functions the harness relies on"
        self.result.timed = timed
        return self.result

    def new_threads(self) -> list[str]:
        """Python threads alive now that were not before the solution loaded (guards are per thread)."""
        return sorted(t.name for t in threading.enumerate() if t not in self.threads and t.is_alive())

    def call(self, forward, inputs: tuple) -> tuple:
        out = as_tuple(forward(*inputs))
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def run_check_inputs(self, forward, w: Workload) -> WorkloadResult:
        """Run on the check inputs under the guards and save the outputs for the checker."""
        inputs, bands = self.guarded_inputs(w, "check")
        pristine = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
        before = self.launches.own_launches
        try:
            with self.guard:
                outputs = self.call(forward, inputs)
        except BaseException as exc:  # noqa: BLE001
            raised = f"{out_of_memory(exc)}forward raised:\n{short_traceback(exc)}"
            # Work done before the exception is named first: it is the rule broken, the crash its aftermath.
            return WorkloadResult(w.name, False, f"{self.torch_work()}\n{raised}" if self.guard.forbidden else raised)
        if self.guard.forbidden:
            return WorkloadResult(w.name, False, self.torch_work())
        if problem := band_problem(bands):
            return WorkloadResult(w.name, False, problem)
        self.launches.note_l2()
        if problem := self.l2_persistence():
            return WorkloadResult(w.name, False, problem)
        if self.launches.own_launches == before:
            return WorkloadResult(w.name, False, "[no-kernel] forward launched no @triton.jit kernel defined in "
                                                 "solution.py")
        if threads := self.new_threads():
            return WorkloadResult(w.name, False, f"[threads] forward left threads running "
                                                 f"({', '.join(threads)}): the guards cannot see them")
        if problem := self.kept_state():
            return WorkloadResult(w.name, False, problem)
        self.first_state[w.name] = state_fingerprint(self.module)
        problem = output_problems(outputs, inputs, pristine, self.task.in_place_inputs, self.task.outputs)
        if problem:
            return WorkloadResult(w.name, False, problem)
        # Not under the memory checker: the profiler and the checker cannot both attach to the context
        # (and the run without it measured the share on these very shapes).
        if self.device.type == "cuda" and not self.req.memcheck:
            share = self.own_kernel_share(forward, inputs)
            if share is not None and share < MIN_OWN_KERNEL_SHARE:
                return WorkloadResult(w.name, False, f"[profiler-coverage] only {share:.0%} of forward's GPU time "
                                                     f"is in solution.py's own Triton kernels (at least "
                                                     f"{MIN_OWN_KERNEL_SHARE:.0%} required)")
        torch.save(portable(outputs), outputs_file(self.req, w.name, "check"))
        return WorkloadResult(w.name, True, "ran; outputs saved for the checker")

    def kept_state(self) -> str | None:
        """The [hidden-state] verdict when the module still holds a tensor after forward, else None."""
        kept = kept_tensors(self.module)
        if not kept:
            return None
        return (f"[hidden-state] after forward returned, the solution's module still holds a tensor at "
                f"{'; '.join(kept)}: nothing may be kept between calls (cache plain values, not tensors)")

    def torch_work(self) -> str:
        ops = ", ".join(sorted(set(self.guard.forbidden))[:5])
        return (f"[torch-work] forward ran torch operators outside Triton kernels ({ops}); only allocation "
                f"and views are allowed")

    def l2_persistence(self) -> str | None:
        """The [l2-persistence] verdict for what the launch counter has seen, or None when nothing."""
        seen, what = self.launches, []
        if seen.l2_set_aside:
            what.append(f"{seen.l2_set_aside / 2**20:.0f} MiB of L2 set aside for persisting lines")
        if seen.l2_window:
            what.append(f"an access-policy window on the stream (now {seen.l2_window / 2**20:.0f} MiB)")
        if not what:
            return None
        return (f"[l2-persistence] forward left {' and '.join(what)}: persisting lines survive the flush, and "
                f"a stream's window applies to the baseline's kernels too")

    def own_kernel_share(self, forward, inputs: tuple) -> float | None:
        """Fraction of forward's GPU kernel time spent in kernels launched from solution.py."""
        own = self.launches.own_names
        rows = self.kernel_times(forward, inputs, calls=1)
        total = sum(r["us_per_call"] for r in rows)
        if total <= 0:
            return None
        return sum(r["us_per_call"] for r in rows if r["kernel"] in own) / total

    def time(self, forward, w: Workload, wr: WorkloadResult) -> None:
        from d2k_env.evaluator.timing import CI_FLOOR, LAUNCH_BOUND_CI_FLOOR, L2Flusher, graph_time, time_pair

        base_sets = [self.inputs(w, "time-baseline", i) for i in range(TIMED_SETS)]
        cand_sets, bands = [], []
        for i in range(TIMED_SETS):
            inputs, inputs_bands = self.guarded_inputs(w, "time-solution", i)
            cand_sets.append(inputs)
            bands += inputs_bands
        warm_c, warm_bands = self.guarded_inputs(w, "warmup-solution")
        bands += warm_bands
        warm_b = self.inputs(w, "warmup-baseline")
        calls, idle_calls = 0, 0

        first_state, state_changes = self.first_state[w.name], 0

        def timed_forward(*args):
            # Every timed call must launch the solution's own kernels: one that launches none did no work.
            # And leave the module's state as the workload's first call did (host work between queued
            # calls: the GPU spin the batch waits behind hides it from the samples).
            nonlocal calls, idle_calls, state_changes
            before = self.launches.own_launches
            out = forward(*args)
            self.launches.note_l2()
            calls += 1
            idle_calls += self.launches.own_launches == before
            state_changes += state_fingerprint(self.module) != first_state
            return out

        try:
            pair = time_pair(self.baseline.forward, timed_forward, base_sets, cand_sets, warm_b, warm_c,
                             L2Flusher(self.device), budget_s=self.req.time_budget_s,
                             seed=derive_seed(self.req.seed, "bootstrap"),
                             ci_floor=LAUNCH_BOUND_CI_FLOOR if w.launch_bound else CI_FLOOR)
            # After every timed call, fresh values written into a timed set's own tensors: the checker
            # sees these outputs too, so a replay keyed by address or shape returns stale outputs and fails.
            late_inputs = cand_sets[0]
            for tensor, fresh in zip(late_inputs, self.inputs(w, "late")):
                if isinstance(tensor, torch.Tensor):
                    tensor.copy_(fresh)
            late = self.call(forward, late_inputs)
        except BaseException as exc:  # noqa: BLE001
            wr.correct, wr.message = False, f"{out_of_memory(exc)}forward raised while being timed:\n" \
                                            f"{short_traceback(exc)}"
            return
        if problem := band_problem(bands):
            wr.correct, wr.message = False, f"{problem}, while being timed"
            return
        if threads := self.new_threads():
            wr.correct, wr.message = False, (f"[threads] forward left threads running while being timed "
                                             f"({', '.join(threads)}): the guards cannot see them")
            return
        if problem := self.kept_state():
            wr.correct, wr.message = False, problem
            return
        if state_changes or state_fingerprint(self.module) != first_state:
            wr.correct, wr.message = False, (
                "[hidden-state] the solution's module state changed on calls with shapes it had already seen "
                "(a counter, or a flag of which call this is): a cache may grow with new shapes, never with calls")
            return
        if idle_calls:
            wr.correct, wr.message = False, (f"[no-kernel] forward launched none of solution.py's kernels on "
                                             f"{idle_calls} of its {calls} timed calls: it did no work there")
            return
        if problem := self.l2_persistence():
            wr.correct, wr.message = False, problem
            return
        torch.save(portable(late), outputs_file(self.req, w.name, "timed"))
        wr.baseline_ms, wr.solution_ms = pair.baseline.median_ms, pair.candidate.median_ms
        wr.baseline_spread, wr.solution_spread = pair.baseline.spread, pair.candidate.spread
        wr.speedup, wr.speedup_ci, wr.repetitions = pair.speedup, pair.speedup_ci, pair.repetitions
        c = self.result.ceilings
        wr.roofline_ms = self.task.roofline(w).floor_ms(c["bandwidth_gbs"], c["tflops"])
        wr.roofline_fraction = wr.roofline_ms / wr.solution_ms
        if wr.solution_ms < (1 - ROOFLINE_SLACK) * wr.roofline_ms:
            wr.correct = False
            wr.message = (f"[below-roofline] {wr.solution_ms:.4f} ms is under the roofline floor of this workload "
                          f"({wr.roofline_ms:.4f} ms): the work cannot have been done")
        if w.launch_bound:  # graph capture runs on the harness's own side stream
            stream, self.launches.stream = self.launches.stream, None
            wr.graph_baseline_ms = graph_time(self.baseline.forward, base_sets[0])
            wr.graph_solution_ms = graph_time(forward, cand_sets[0])
            self.launches.stream = stream

    def kernel_times(self, forward, inputs: tuple, calls: int) -> list[dict]:
        from torch.autograd import DeviceType

        # The profiler's own UserWarnings are the harness's noise, not the solution's output.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with gpu_kernel_profiler() as prof:
                for _ in range(calls):
                    forward(*inputs)
                torch.cuda.synchronize()
            rows = [{"kernel": e.key, "calls": e.count // calls, "us_per_call": e.device_time_total / calls}
                    for e in prof.key_averages() if e.device_type == DeviceType.CUDA]
        return sorted(rows, key=lambda r: -r["us_per_call"])

    def profile(self, forward, w: Workload) -> list[dict]:
        inputs = self.inputs(w, "profile")
        self.call(forward, inputs)
        return self.kernel_times(forward, inputs, calls=5)


class CheckRun(Run):
    """Compares saved solution outputs with the baseline's, in a process without the solution."""

    def run(self) -> EvalResult:
        for w in self.workloads:
            self.channel.phase("verify", w.name)
            wr = self.verify(w, "check", self.inputs(w, "check"))
            timed_file = outputs_file(self.req, w.name, "timed")
            if wr.correct and timed_file.exists():
                late = self.verify(w, "timed", self.inputs(w, "late"))
                if not late.correct:
                    wr = WorkloadResult(w.name, False, f"[late-corruption] outputs after the timed calls are "
                                                       f"wrong: {late.message}", late.max_abs_err, late.max_rel_err)
            self.result.workloads.append(wr)
        return self.result

    def verify(self, w: Workload, kind: str, inputs: tuple) -> WorkloadResult:
        expected = as_tuple(self.baseline.forward(*inputs))
        outputs = tuple(moved(o, self.device) for o in torch.load(outputs_file(self.req, w.name, kind)))
        v = verdict_for(self.task, outputs, expected, inputs)
        return WorkloadResult(w.name, v.ok, v.message, v.max_abs_err, v.max_rel_err)


def gpu_kernel_profiler():
    """The GPU kernels' profiler (Kineto over CUPTI, no CPU events), taken from the autograd
    profiler that ``torch.profiler.profile`` wraps: the wrapper's start imports ``torch._inductor``
    (to read a CUDA-graph setting), about 800 modules and 3.7-5.8 s of a fresh worker on the H200."""
    from torch.autograd.profiler import profile
    return profile(use_cpu=False, use_device="cuda", use_kineto=True)


def _run_fingerprint() -> dict[str, object]:
    """harness_fingerprint, plus what a run calls through this module's globals and its classes'
    attributes (methods of the run, the launch counter and the guard), plus the thresholds' values."""
    g = globals()
    fp: dict[str, object] = dict(harness_fingerprint())
    fp.update({f"worker.{n}": id(g.get(n)) for n in (
        "harness_fingerprint", "output_problems", "as_tuple", "short_traceback", "outputs_file", "portable", "moved",
        "out_of_memory", "kept_tensors", "state_fingerprint", "band_problem", "guard_inputs",
        "_device_broken", "access_policy_window_bytes", "derive_seed", "gpu_kernel_profiler", "SolutionRun",
        "LaunchCounter", "TorchWorkGuard")})
    for cls in (Run, SolutionRun, LaunchCounter, TorchWorkGuard, GuardBand):
        fp.update({f"{cls.__name__}.{m}": id(v) for m, v in vars(cls).items() if callable(v)})
    fp.update({f"worker.{n}": g.get(n) for n in ("MIN_OWN_KERNEL_SHARE", "ROOFLINE_SLACK", "TIMED_SETS")})
    return fp


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


def prepare() -> None:
    """What every evaluation of this worker's backend needs whatever its role and device, done before
    any request exists, and safe to fork from (no CUDA, no thread pools; the fork server does it
    once for all the workers it forks): Triton, and on the interpreter (``TRITON_INTERPRET=1`` in the
    environment the sandbox gave it) the patch that makes it compute like the GPU; on the GPU the
    timing module; one allocation under the torch-work guard, whose first operator
    sets up torch's Python dispatch; Triton's own key, a hash of its installed files (0.4 s).
    Nothing of a task or a solution is touched."""
    import triton.language  # noqa: F401 - imported for its first use
    try:
        from triton.runtime.cache import triton_key  # cached after its first call
        triton_key()
    except (ImportError, AttributeError):  # not every Triton has it: only a saving is lost
        pass
    if os.environ.get("TRITON_INTERPRET") == "1":
        from d2k_env.evaluator import interpreter_patch
        interpreter_patch.apply()
    else:
        from d2k_env.evaluator import timing  # noqa: F401 - imported for its first use
    with TorchWorkGuard(frozenset()):
        torch.empty(1)


def warm_device(interprets: bool) -> None:
    """What this worker's device and role (``D2K_WORKER_ROLE``) need before the request, after
    :func:`prepare`: on the GPU the CUDA context of device 0 of those ``CUDA_VISIBLE_DEVICES`` shows
    and, for the solution role (but under the memory checker, which the profiler cannot share the
    context with), one profiled operator, so that the profiler's start-up (Kineto's and CUPTI's) is
    not the first workload's."""
    if interprets or not torch.cuda.is_available():
        return
    torch.zeros(1, device="cuda:0")
    if os.environ.get("D2K_WORKER_ROLE") == "solution" and os.environ.get("D2K_WORKER_MEMCHECK") != "1":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with gpu_kernel_profiler():
                torch.zeros(1, device="cuda:0")
                torch.cuda.synchronize()


def serve(channel_fd: int, processes: bool, prepared: bool = False) -> None:
    """One worker's life after the sandbox's other layers: seccomp (the last layer, installed before
    the solution loads; ``processes`` says whether new processes are allowed: on the GPU, Triton
    runs ptxas, the interpreter needs none), the warm-up (:func:`prepare` unless ``prepared``, then
    :func:`warm_device`), the warm mark, then the one request on stdin, its result on ``channel_fd``."""
    filtered = seccomp(processes=processes)
    if not prepared:
        prepare()
    interprets = os.environ.get("TRITON_INTERPRET") == "1"
    warm_device(interprets)
    if token := os.environ.pop("D2K_WARM_TOKEN", ""):  # sandbox.WARM_MARK: the env times nothing beside
        os.write(1, f"d2k-worker-warm:{token}\n".encode())  # a worker still warming up
    text = sys.stdin.read()
    if not text:
        return  # a spare closed unused: no request will come
    req = EvalRequest.from_json(text)
    channel = Channel(channel_fd)
    backend = "cuda" if req.device == "cuda" else "interpreter"
    try:
        if interprets != (req.device == "cpu"):
            raise RuntimeError(f"a {req.device} request reached a worker started for the "
                               f"{'interpreter' if interprets else 'GPU'}")
        run = SolutionRun(req, channel) if req.role == "solution" else CheckRun(req, channel)
        result = run.run()
    except MemoryError:  # the harness's own allocation hit the address-space limit
        result = EvalResult(req.mode, backend, error=f"[memory] the {req.role} process ran out of memory")
    except Exception as exc:  # noqa: BLE001 - a crash of the harness is reported, not hidden in a SIGKILL
        result = EvalResult(req.mode, backend, error=f"the {req.role} process failed:\n{short_traceback(exc)}")
    result.sandbox["seccomp"] = filtered
    channel.result(result.to_dict())


def main() -> None:
    serve(int(sys.argv[1]), sys.argv[2] == "processes")


if __name__ == "__main__":
    main()
