"""Runtime guards around a solution's ``forward``, installed by the worker before the solution is
imported (so the solution can only ever see the harness's versions of what they wrap).

- :class:`TorchWorkGuard` records every aten operator ``forward`` runs outside Triton kernel
  launches; only allocation, views and the task's allowed torch calls may run there.
- :class:`LaunchGuard` checks every kernel launch (its arguments, stream and hooks), and pauses the
  torch guard while a launch runs (the interpreter moves tensors with aten ops of its own); since
  the interpreted body can call back into its arguments there, a launch takes plain values only.
  With a :class:`~d2k_env.evaluator.recorder.Recorder` set on the guard, a launch of the
  solution's own kernels is recorded instead of run (the trusted replay runs it).
- :func:`output_problems` checks exact tensor types, aliasing of inputs and input mutation.
"""

from __future__ import annotations

import functools
import inspect
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode


# aten operators that allocate or make views: never the task's work.
VIEW_AND_ALLOCATION_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "unsqueeze", "squeeze", "slice", "select", "transpose", "permute",
    "expand", "split", "split_with_sizes", "unbind", "alias", "as_strided", "detach", "unflatten", "narrow",
    "movedim", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
})


class TorchWorkGuard(TorchDispatchMode):
    """Records aten operators outside :data:`VIEW_AND_ALLOCATION_OPS` and the task's allow-list."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # By default torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable, whose first call
        # imports the whole compiler stack: 2-3 s of CPU in every solution worker. Nothing is lost
        # without it: the policy refuses torch.compile, and Dynamo skips any frame while a dispatch
        # mode is on the stack anyway.
        return False

    def __init__(self, allowed: frozenset[str]):
        super().__init__()
        self.allowed = VIEW_AND_ALLOCATION_OPS | allowed
        self.forbidden: list[str] = []
        self.paused = 0
        self.recorder = None  # a Recorder sees every operator (allocations and fills become its buffers and steps)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused and func.overloadpacket.__name__ not in self.allowed:
            self.forbidden.append(str(func))
        result = func(*args, **(kwargs or {}))
        if self.recorder is not None:
            self.recorder.observe(func, args, kwargs or {}, result)
        return result


class LaunchGuard:
    """Wraps Triton's launch entry points: checks each launch, and hands the solution's own to the recorder."""

    def __init__(self, solution_path: str, guard: TorchWorkGuard):
        self.solution_path = solution_path
        self.guard = guard
        # The one CUDA stream launches may use (None: unchecked): the replay runs every launch on one.
        self.stream = None

    def install(self) -> None:
        from triton.runtime import autotuner, interpreter, jit

        for cls in (jit.JITFunction, interpreter.InterpretedFunction):
            cls.run = self._wrap(cls.run)
        autotuner.Autotuner._bench = self._wrap_autotune_bench(autotuner.Autotuner._bench)
        # The configs left after pruning are checked too: from Triton 3.8 a tuner left with one config
        # skips _bench, and on the interpreter (which keeps one config) it always is left with one.
        autotuner.Autotuner.prune_configs = self._wrap_autotune_prune(autotuner.Autotuner.prune_configs, self.guard)
        autotuner.Heuristics.run = self._wrap_heuristics(autotuner.Heuristics.run)

    def _wrap_heuristics(self, run):
        """Heuristic functions are the solution's host code: guarded even inside a paused autotune bench."""
        launch_guard = self

        def guarded_run(heuristics, *args, **kwargs):
            values = heuristics.values
            heuristics.values = {name: launch_guard._guarded(fn) for name, fn in values.items()}
            try:
                return run(heuristics, *args, **kwargs)
            finally:
                heuristics.values = values

        return guarded_run

    def _wrap_autotune_bench(self, bench):
        """Triton's autotuner benchmarks configs inside forward with torch ops of its own (an L2
        flush, resets of the tensors named in reset_to_zero): pause the guard for that, and refuse
        the solution's own hooks, which would run there unguarded."""
        guard = self.guard

        def guarded_bench(tuner, *args, config, **meta):
            _refuse_bench_hooks(tuner, [config])
            guard.paused += 1
            recorder = guard.recorder  # the tuner's timing launches run for real, and none is recorded
            if recorder is not None:
                recorder.benching += 1
                recorder.ignoring += 1
            try:
                return bench(tuner, *args, config=config, **meta)
            finally:
                guard.paused -= 1
                if recorder is not None:
                    recorder.benching -= 1
                    recorder.ignoring -= 1

        return guarded_bench

    @staticmethod
    def _wrap_autotune_prune(prune_configs, guard):
        """The configs a tuner keeps to time are refused as in _wrap_autotune_bench, whether or not it
        goes on to time them: the verdict is the same under every Triton and on either backend. With
        no hook of the solution's, the tuner's pre_hook is Triton's own reset of reset_to_zero (and
        restore_value) arguments, which it also calls once after timing, outside _bench: paused there
        too, as in the timing runs it resets for."""

        def checked_prune(tuner, *args, **kwargs):
            configs = prune_configs(tuner, *args, **kwargs)
            _refuse_bench_hooks(tuner, configs)
            if not getattr(tuner.pre_hook, "_d2k_paused", False):
                tuner.pre_hook = _paused(tuner.pre_hook, guard)
            return configs

        return checked_prune

    def _wrap(self, run):
        launch_guard = self

        def counted_run(kernel, *args, **kwargs):
            fn = getattr(kernel, "fn", None)
            if getattr(kernel, "pre_run_hooks", None):
                launch_guard.guard.forbidden.append("pre-run hooks on a kernel (host code inside the launch)")
            problem = launch_argument_problem(fn, args, kwargs)
            if problem:
                raise TypeError(f"[launch-args] {problem}")
            if launch_guard.stream is not None and torch.cuda.current_stream() != launch_guard.stream:
                raise RuntimeError("[side-stream] a kernel was launched on another CUDA stream than the one "
                                   "forward was called on: its work would escape the timer")
            recorder = launch_guard.guard.recorder
            if recorder is not None and threading.get_ident() != recorder.thread:
                # Another thread's launch while forward is recorded (a warm-up the solution started at
                # import): no forward call made it, so it is neither recorded nor run.
                return None
            if recorder is not None and not recorder.benching and not kwargs.get("warmup") and \
                    getattr(getattr(fn, "__code__", None), "co_filename", None) == launch_guard.solution_path:
                recorder.launch(kernel, args, kwargs, launch_guard._guarded)  # recorded, not run: the replay runs it
                return None
            if callable(kwargs.get("grid")):  # the grid function is host code: keep it guarded
                kwargs["grid"] = launch_guard._guarded(kwargs["grid"])
            launch_guard.guard.paused += 1
            if recorder is not None:
                recorder.ignoring += 1
            try:
                return run(kernel, *args, **kwargs)
            finally:
                launch_guard.guard.paused -= 1
                if recorder is not None:
                    recorder.ignoring -= 1

        return counted_run

    def _guarded(self, fn):
        guard = self.guard

        def guarded_fn(*args, **kwargs):
            paused, guard.paused = guard.paused, 0
            try:
                return fn(*args, **kwargs)
            finally:
                guard.paused = paused

        return guarded_fn


def _paused(hook, guard):
    """Triton's own autotune reset hook, run with the torch guard paused."""
    def paused_hook(*args, **kwargs):
        guard.paused += 1
        try:
            return hook(*args, **kwargs)
        finally:
            guard.paused -= 1

    paused_hook._d2k_paused = True
    return paused_hook


def _refuse_bench_hooks(tuner, configs) -> None:
    """Refuse what would run unguarded inside an autotuner's timing: the solution's own hooks and timer,
    and an autotuner over another (its prune functions would run inside the pause)."""
    if (any(config.pre_hook for config in configs) or tuner.user_defined_pre_hook or tuner.user_defined_post_hook
            or tuner._do_bench is not None):
        raise TypeError("[launch-args] autotune pre_hook, post_hook and do_bench are host code the "
                        "guards cannot see; reset_to_zero and restore_value are allowed")
    if isinstance(tuner.fn, type(tuner)):
        raise TypeError("[launch-args] an autotuner over another autotuner: tune one set of configs")


# Launch arguments reach the interpreted kernel body, which calls back into them (truth tests,
# attribute lookups, len on the grid) while the torch guard is paused: only plain values may pass.
PLAIN_ARGUMENT_TYPES = (int, float, bool, str, type(None), torch.dtype)


@functools.cache
def _triton_kinds() -> tuple[type, tuple[type, ...]]:
    """tl.constexpr, and Triton's own dtypes, kernels (a constexpr may name a device function) and
    tensor descriptors."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    from triton.tools.tensor_descriptor import TensorDescriptor
    return tl.constexpr, (tl.dtype, JITFunction, InterpretedFunction, TensorDescriptor)


def _plain(value, tensors_allowed: bool) -> bool:
    if type(value) in PLAIN_ARGUMENT_TYPES or (tensors_allowed and type(value) is torch.Tensor):
        return True
    if type(value) is tuple:  # tuples of plain values (shapes, tuples of pointers)
        return all(_plain(v, tensors_allowed) for v in value)
    constexpr, kinds = _triton_kinds()
    if isinstance(value, constexpr):
        return type(value) is constexpr and _plain(value.value, False)
    return isinstance(value, kinds) and type(value).__module__.startswith("triton.")


@functools.cache
def _parameters(fn) -> tuple[tuple[str, ...], frozenset[str]]:
    """A kernel's parameter names, and those annotated tl.constexpr."""
    params = list(inspect.signature(fn).parameters.values())
    return tuple(p.name for p in params), frozenset(p.name for p in params if "constexpr" in str(p.annotation))


def launch_argument_problem(fn, args: tuple, kwargs: dict) -> str | None:
    """Why a kernel launch's arguments are not plain values, or None when they are."""
    try:
        names, constexpr = _parameters(fn)
    except (TypeError, ValueError):  # not a plain function: nothing to bind the arguments to
        names, constexpr = (), frozenset()
    named = list(zip(names, args)) + [(k, v) for k, v in kwargs.items() if k != "grid"]
    for name, value in named:
        if not _plain(value, tensors_allowed=name not in constexpr):
            return (f"kernel argument {name!r} is a {type(value).__name__}: launches take tensors (as pointers), "
                    f"numbers, booleans, strings, None and dtypes only (a tl.constexpr takes no tensor)")
    grid = kwargs.get("grid")
    # torch.Size is a tuple of ints whose methods are C code: no host code of the solution's runs in it.
    if not callable(grid) and not (type(grid) in (tuple, list, torch.Size) and all(type(g) is int for g in grid)):
        return f"the launch grid is a {type(grid).__name__}: it must be a tuple of ints or a function returning one"
    return None


def output_problems(outputs: tuple, inputs: tuple, pristine: tuple, in_place: frozenset[int], names: list[str]
                    ) -> str | None:
    """Exact tensor type on the inputs' device, no storage shared with an input, inputs unchanged. None when fine."""
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
    for name, out in zip(names, outputs):
        if type(out) is not torch.Tensor:
            return f"[output-type] output {name!r} is a {type(out).__name__}, not a torch.Tensor"
        if device is not None and out.device != device:  # meta tensors hold no values at all
            return f"[output-type] output {name!r} is on {out.device}; the inputs are on {device}"
    input_storages = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
    for name, out in zip(names, outputs):
        if out.untyped_storage().data_ptr() in input_storages:
            return f"[aliasing] output {name!r} shares storage with an input; return new tensors"
    for i, (x, before) in enumerate(zip(inputs, pristine)):
        if i not in in_place and isinstance(x, torch.Tensor) and not torch.equal(x, before):
            return f"[input-mutation] input {i} was modified by forward; inputs must stay unchanged"
    return None
