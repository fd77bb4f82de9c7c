"""Evaluation workers: each runs in a child process, one evaluation per process.

Usage (by the supervisor, :mod:`d2k_env.evaluator.reaper`, only): ``python -m d2k_env.evaluator.worker
FD processes|no-processes`` with the JSON :class:`EvalRequest` on stdin, which the worker reads only
once it is warm (see :func:`prepare` and :func:`warm_device`): a spare waits there, and an empty
stdin ends it unused. (A worker forked by the fork server runs :func:`serve` the same way.)
Progress and the result are JSON lines on file descriptor FD, the harness's own channel: whatever
the solution prints goes to stdout/stderr and never counts.

Three roles, three processes; only the first imports the solution (the trust boundary):

- ``solution`` imports the solution (after the harness's guards are in place) and records what its
  ``forward`` launches on each workload, on inputs drawn from a recording key (never the inputs key);
  nothing it reports is believed but its own failures;
- ``replay`` rebuilds the recorded kernels from the checked source text, runs the recording on the
  check inputs (saving the outputs) and, when timed, times it against the baseline;
- ``check`` regenerates the check inputs, computes the baseline's expected outputs and compares them
  with the replay's. Expected outputs never exist where the solution's Python or kernels run.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import linecache
import math
import os
import sys
import traceback
import warnings
from pathlib import Path
from types import ModuleType

import torch
from torch.utils.serialization import config as serialization_config

from d2k_env.evaluator.checking import as_tuple, verdict_for
from d2k_env.evaluator.confine import seccomp
from d2k_env.evaluator.baseline_check import ROOFLINE_SLACK
from d2k_env.evaluator.guard_bands import GuardBand, band_problem, guard_inputs
from d2k_env.evaluator.guards import LaunchGuard, TorchWorkGuard, output_problems
from d2k_env.evaluator.l2_state import release_persisting_l2
from d2k_env.evaluator.protocol import EvalRequest, EvalResult, WorkloadResult, derive_seed
from d2k_env.evaluator.recorder import Recorder, RecordError
from d2k_env.evaluator.recording import RecordingError, first_difference, parse
from d2k_env.evaluator.replay import Replay, ReplayError, kernels_using_dot, rebuild_kernels
from d2k_env.evaluator.source_text import tokenizer_lines
from d2k_env.task import Task, Workload, load_snapshot
from d2k_env.tasks.properties import Facts, findings

TIMED_SETS = 3
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


def save_for_checker(outputs: tuple, path: Path) -> None:
    """Write host copies of ``outputs`` (:func:`portable`) where the check process reads them. The
    file passes between two trusted processes of one evaluation, so torch.save's CRC32 of every
    record (a third of the time a 256 MB output takes to write) is skipped."""
    with serialization_config.patch({"save.compute_crc32": False}):
        torch.save(portable(outputs), path)


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
    """Imports the solution and records what ``forward`` launches on each workload (untrusted: see
    :mod:`d2k_env.evaluator.recorder`). Its inputs are drawn from the recording key, never from the
    inputs key: the solution sees no input that is checked or timed. Each workload is recorded on two
    sets of inputs of its shapes, which must give the same recording (forward's contract)."""

    def run(self) -> EvalResult:
        self.channel.phase("load")
        self.guard = TorchWorkGuard(self.task.allowed_torch)
        self.launches = LaunchGuard(self.req.solution_path, self.guard)
        self.launches.install()
        try:
            solution = load_module(self.req.solution_path, "solution", self.req.solution_source)
            forward = getattr(solution, "forward", None)
            if not callable(forward):
                raise AttributeError("solution.py must define a function forward(*inputs)")
        except BaseException as exc:  # noqa: BLE001 - anything the solution does at import is its fault
            self.result.error = f"{out_of_memory(exc)}solution.py failed to load:\n{short_traceback(exc)}"
            return self.result
        if self.req.mode == "profile":
            self.channel.phase("profile", self.workloads[0].name)
            self.result.profile = self.profile(forward, self.workloads[0])
            return self.result
        if self.device.type == "cuda":
            self.launches.stream = torch.cuda.current_stream()
        for w in self.workloads:
            self.channel.phase("record", w.name)
            self.result.workloads.append(self.record(forward, w))
        return self.result

    def record(self, forward, w: Workload) -> WorkloadResult:
        """Record ``forward`` on input sets of ``w``'s shapes and save the recording for the replay: a
        first call (an autotuner tunes there, and resets its buffers once), then two that must agree.
        Every set stays alive until the last call, so no set reuses a freed one's addresses: whether a
        cache keyed on pointers hits never depends on the allocator."""
        recordings, held = [], []
        for i in range(3):
            inputs = self.inputs(w, "record", i)
            held.append(inputs)
            recorder = Recorder(inputs, self.req.solution_path)
            self.guard.recorder = recorder
            try:
                with self.guard:
                    outputs = self.call(forward, inputs)
            except BaseException as exc:  # noqa: BLE001
                raised = f"{out_of_memory(exc)}forward raised:\n{short_traceback(exc)}"
                return WorkloadResult(w.name, False, f"{self.torch_work()}\n{raised}" if self.guard.forbidden
                                      else raised)
            finally:
                self.guard.recorder = None
            if self.guard.forbidden:
                return WorkloadResult(w.name, False, self.torch_work())
            if len(outputs) != len(self.task.outputs):
                return WorkloadResult(w.name, False, f"[output-type] forward returned {len(outputs)} value(s); "
                                                     f"expected {len(self.task.outputs)} "
                                                     f"({', '.join(self.task.outputs) or 'none: return None'})")
            for name, out in zip(self.task.outputs, outputs):
                if type(out) is not torch.Tensor:
                    return WorkloadResult(w.name, False, f"[output-type] output {name!r} is a {type(out).__name__}, "
                                                         f"not a torch.Tensor")
            try:
                recordings.append(recorder.finish(outputs))
            except RecordError as exc:
                return WorkloadResult(w.name, False, f"[record] {exc}")
        if difference := first_difference(*recordings[1:]):
            return WorkloadResult(w.name, False, f"[launch-contract] {difference}, on two calls with inputs of the "
                                                 f"same shapes: forward's launches may depend only on the inputs' "
                                                 f"shapes, dtypes, strides and device, never on their values")
        outputs_file(self.req, w.name, "recording").write_text(recordings[1].to_json())
        return WorkloadResult(w.name, True, "recorded")

    def call(self, forward, inputs: tuple) -> tuple:
        out = as_tuple(forward(*inputs))
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def torch_work(self) -> str:
        ops = ", ".join(sorted(set(self.guard.forbidden))[:5])
        return (f"[torch-work] forward ran torch operators outside Triton kernels ({ops}); only allocation "
                f"and views are allowed")

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


class ReplayRun(Run):
    """The trusted measuring process: never imports the solution. Per workload it rebuilds the
    recorded kernels from the checked source text (:mod:`d2k_env.evaluator.replay`), replays the
    recording on the check inputs (outputs saved for the check process) and, in a timed mode on the
    GPU, times the replay against the baseline on fresh inputs. Inputs are guarded by bands; inputs
    that are not the task's in-place ones must come back unchanged."""

    def run(self) -> EvalResult:
        self.channel.phase("load")
        if self.device.type == "cuda":
            torch.zeros(1, device=self.device)  # creates the context whose set-aside is released
            release_persisting_l2()
        self.kernels: dict[str, dict] = {}  # per recording's kernel table: the rebuilt kernels
        timed = self.req.mode in ("benchmark", "submit") and self.device.type == "cuda"
        if timed:
            self.channel.phase("ceilings")
            self.result.ceilings = self.req.ceilings or _measure_ceilings(self.device)
        faulted = None
        for w in self.workloads:
            if faulted:
                self.result.workloads.append(WorkloadResult(w.name, False, f"not run: {faulted}"))
                continue
            self.channel.phase("replay", w.name)
            replay, wr = self.replay_of(w)
            if replay is not None:
                wr = self.run_check_inputs(replay, w)
                if wr.correct and timed and not w.heldout:
                    self.channel.phase("time", w.name)
                    self.time(replay, w, wr)
            self.result.workloads.append(wr)
            if not wr.correct and self.device.type == "cuda" and _device_broken():
                faulted = f"the GPU context was lost during workload {w.name}"
        self.result.timed = timed
        return self.result

    def replay_of(self, w: Workload) -> tuple[Replay | None, WorkloadResult | None]:
        """The workload's recording, validated, with its kernels rebuilt; or the verdict why not."""
        names = list(inspect.signature(self.baseline.forward).parameters)
        try:
            text = outputs_file(self.req, w.name, "recording").read_text()
            recording = parse(text, len(names))
            if not recording.launches:
                return None, WorkloadResult(w.name, False, "[no-kernel] forward launched no @triton.jit kernel "
                                                           "defined in solution.py")
            table = json.dumps({k: vars(v) for k, v in recording.kernels.items()}, sort_keys=True)
            if table not in self.kernels:
                self.kernels[table] = rebuild_kernels(self.req.solution_source or "", self.req.solution_path,
                                                      recording)
        except FileNotFoundError:
            return None, WorkloadResult(w.name, False, "[record] the solution process left no recording")
        except (RecordingError, ReplayError) as exc:
            return None, WorkloadResult(w.name, False, f"[record] {exc}")
        return Replay(recording, self.kernels[table], self.device), None

    def replayed(self, replay: Replay, inputs: tuple, poison: bool = False) -> tuple:
        out = replay(*inputs, poison=poison)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def run_check_inputs(self, replay: Replay, w: Workload) -> WorkloadResult:
        """Replay on the check inputs and save the outputs for the checker; what forward allocates is
        measured (and, where the task bounds it, held to its limit)."""
        allocated = sum(b.nbytes for b in replay.recording.buffers)
        limit = self.task.spec.allocation_limit(w) if self.task.spec.allocation_limit else None
        if limit is not None and allocated > limit:
            return WorkloadResult(w.name, False, f"[allocation-limit] forward allocates {_size(allocated)} on this "
                                                 f"workload; the task allows {_size(limit)} (see its description): "
                                                 f"work through the data in chunks", allocated_bytes=allocated)
        inputs, bands = self.guarded_inputs(w, "check")
        pristine = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(self.device)
            held = torch.cuda.memory_allocated(self.device)
        try:
            outputs = self.replayed(replay, inputs, poison=True)
        except ReplayError as exc:
            return WorkloadResult(w.name, False, f"[record] {exc}")
        except BaseException as exc:  # noqa: BLE001 - a kernel that fails to compile or run
            return WorkloadResult(w.name, False, f"{out_of_memory(exc)}a kernel failed:\n{short_traceback(exc)}")
        if problem := band_problem(bands):
            return WorkloadResult(w.name, False, problem)
        if problem := output_problems(outputs, inputs, pristine, self.task.in_place_inputs, self.task.outputs):
            return WorkloadResult(w.name, False, problem)
        peak = torch.cuda.max_memory_allocated(self.device) - held if self.device.type == "cuda" else None
        save_for_checker(self.task.checked_values(outputs, inputs), outputs_file(self.req, w.name, "check"))
        return WorkloadResult(w.name, True, "replayed; outputs saved for the checker", allocated_bytes=allocated,
                              peak_bytes=peak, properties=self.properties(replay, w, inputs, peak))

    def properties(self, replay: Replay, w: Workload, inputs: tuple, peak: int | None) -> dict[str, dict]:
        """The findings of the task's automatically checked design properties on this workload, from
        the recording this process replayed and its measurements (see :mod:`d2k_env.tasks.properties`).
        Reported beside the verdict, never paid: a check that fails is reported as unchecked, never
        as the evaluation's failure."""
        properties = self.task.spec.design_properties
        if not any(p.check is not None for p in properties):
            return {}
        recording = replay.recording
        try:
            facts = Facts(
                launches=tuple(recording.kernels[s.kernel].name for s in recording.launches),
                kernels_using_dot=kernels_using_dot(recording, replay.kernels.trees),
                buffer_bytes=tuple(b.nbytes for b in recording.buffers),
                output_bytes=sum(math.prod(v.shape) * getattr(torch, v.dtype).itemsize for v in recording.outputs),
                input_bytes=sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor)),
                # No profiler counter of DRAM traffic is read yet (the kernel profiler gives times
                # only): properties on bytes moved stay unchecked on every backend for now.
                bytes_moved=None,
                peak_bytes=peak)
            found = findings(properties, facts, self.task.roofline(w).bytes)
        except Exception as exc:  # noqa: BLE001 - a finding is a report: its failure must not fail the workload
            why = f"the automatic check failed ({type(exc).__name__}: {exc})"[:300]
            return {p.id: {"status": "unchecked", "detail": why} for p in properties if p.check is not None}
        return {pid: {"status": f.status, "detail": f.detail} for pid, f in found.items()}

    def time(self, replay: Replay, w: Workload, wr: WorkloadResult) -> None:
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
        try:
            pair = time_pair(self.baseline.forward, replay, base_sets, cand_sets, warm_b, warm_c,
                             L2Flusher(self.device), budget_s=self.req.time_budget_s,
                             seed=derive_seed(self.req.seed, "bootstrap"),
                             ci_floor=LAUNCH_BOUND_CI_FLOOR if w.launch_bound else CI_FLOOR)
            # After every timed call, fresh values written into a timed set's own tensors: the checker
            # sees these outputs too, so kernels that went wrong while being timed fail.
            late_inputs = cand_sets[0]
            for tensor, fresh in zip(late_inputs, self.inputs(w, "late")):
                if isinstance(tensor, torch.Tensor):
                    tensor.copy_(fresh)
            late = self.replayed(replay, late_inputs)
        except BaseException as exc:  # noqa: BLE001
            wr.correct, wr.message = False, f"{out_of_memory(exc)}a kernel failed while being timed:\n" \
                                            f"{short_traceback(exc)}"
            return
        if problem := band_problem(bands):
            wr.correct, wr.message = False, f"{problem}, while being timed"
            return
        save_for_checker(self.task.checked_values(late, late_inputs), outputs_file(self.req, w.name, "timed"))
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
        if w.launch_bound:
            wr.graph_baseline_ms = graph_time(self.baseline.forward, base_sets[0])
            wr.graph_solution_ms = graph_time(replay, cand_sets[0])


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
        # The baseline updates the task's in-place inputs as forward must: their new values are checked too.
        expected = self.task.checked_values(as_tuple(self.baseline.forward(*inputs)), inputs)
        outputs = tuple(moved(o, self.device) for o in torch.load(outputs_file(self.req, w.name, kind)))
        v = verdict_for(self.task, outputs, expected, inputs)
        return WorkloadResult(w.name, v.ok, v.message, v.max_abs_err, v.max_rel_err)


def gpu_kernel_profiler():
    """The GPU kernels' profiler (Kineto over CUPTI, no CPU events), taken from the autograd
    profiler that ``torch.profiler.profile`` wraps: the wrapper's start imports ``torch._inductor``
    (to read a CUDA-graph setting), about 800 modules and 3.7-5.8 s of a fresh worker on the H200."""
    from torch.autograd.profiler import profile
    return profile(use_cpu=False, use_device="cuda", use_kineto=True)


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


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
    """What this worker's device needs before the request, after :func:`prepare`: on the GPU the CUDA
    context of device 0 of those ``CUDA_VISIBLE_DEVICES`` shows."""
    if interprets or not torch.cuda.is_available():
        return
    torch.zeros(1, device="cuda:0")


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
        run = {"solution": SolutionRun, "replay": ReplayRun, "check": CheckRun}[req.role](req, channel)
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
