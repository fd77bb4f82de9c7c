"""Records one call of a solution's ``forward``: the untrusted side of the trust boundary.

Runs in the solution process, so nothing here is believed by anyone: it only writes the
:class:`~d2k_env.evaluator.recording.Recording` that the trusted replay validates and runs. A
solution that tampers with it can only make its own recording wrong (its replay then fails or
computes wrong outputs, which the check process sees).

The recorder sees forward's torch operators through the torch-work guard (:meth:`Recorder.observe`:
allocations become buffers, ``zero_``/``fill_`` become fill steps) and its kernel launches through
the launch counter (:meth:`Recorder.launch`). A recorded launch is not run: the trusted replay runs
it. Only Triton's autotuner, which must time its configs to choose one, launches for real
(:attr:`Recorder.benching`), and ``warmup`` compiles without launching.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading
import types

import torch

from d2k_env.evaluator.recording import LAUNCH_OPTIONS, Buffer, Fill, Kernel, Launch, Recording, Ref, View

ALLOCATIONS = {"empty": None, "empty_like": None, "empty_strided": None, "new_empty": None,
               "new_empty_strided": None, "zeros": 0, "zeros_like": 0, "new_zeros": 0, "ones": 1, "ones_like": 1,
               "new_ones": 1, "full": "arg1", "full_like": "arg1", "new_full": "arg2"}
FILLS = {"zero_": 0, "fill_": "arg1"}


class RecordError(Exception):
    """Forward did something a recording cannot express (the message says what, for the solution's author)."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Recorder:
    """Collects one forward call on ``inputs``; :meth:`finish` with its outputs gives the recording.

    ``solution_path`` names the file whose kernels are the solution's: a launch of any other
    kernel is refused (only the solution's own kernels can be rebuilt from its checked source)."""

    def __init__(self, inputs: tuple, solution_path: str):
        self.solution_path = solution_path
        self.thread = threading.get_ident()  # forward's: the thread that records it
        self.inputs = [(x.data_ptr(), _extent_bytes(x)) if isinstance(x, torch.Tensor) else None for x in inputs]
        self.buffers: list[tuple[int, int, str, object]] = []  # (address, nbytes, dtype, fill), in allocation order
        self.steps: list = []
        self.kernels: dict[str, Kernel] = {}
        self.ignoring = 0  # > 0 inside a launch (the interpreter moves data with aten ops) or a tuner's timing
        self.benching = 0  # > 0 inside an autotuner's timing of its configs: those launches run for real
        self.error: str | None = None

    # -- torch operators (from the torch-work guard's dispatch) -------------------------------------------------
    def observe(self, func, args: tuple, kwargs: dict, result) -> None:
        if self.ignoring or self.error:
            return
        name = func.overloadpacket.__name__
        if name in ALLOCATIONS and isinstance(result, torch.Tensor):
            storage = result.untyped_storage()
            self.buffers.append((storage.data_ptr(), storage.nbytes(), dtype_name(result.dtype),
                                 _fill_value(ALLOCATIONS[name], args)))
        elif name in FILLS and args and isinstance(args[0], torch.Tensor):
            value = _fill_value(FILLS[name], args)
            try:
                self.steps.append(Fill(self.view(args[0], "a filled tensor"), value))
            except RecordError as exc:
                self.error = str(exc)

    # -- kernel launches (from the launch counter) --------------------------------------------------------------
    def launch(self, kernel, args: tuple, kwargs: dict, guarded) -> None:
        """Record ``kernel[grid](*args, **kwargs)`` (``kwargs`` holds the grid); ``guarded`` wraps the
        solution's host code (a grid function) in the torch-work guard."""
        if self.error:
            return
        try:
            fn = kernel.fn
            names = list(inspect.signature(fn).parameters)
            options = {k: v for k, v in kwargs.items() if k not in names and k not in ("grid", "warmup")}
            unknown = sorted(set(options) - LAUNCH_OPTIONS)
            if unknown:
                raise RecordError(f"kernel {fn.__name__} was launched with {', '.join(unknown)}, which are neither "
                                  f"its parameters nor launch options ({', '.join(sorted(LAUNCH_OPTIONS))})")
            bound = inspect.signature(fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
            bound.apply_defaults()
            grid = kwargs.get("grid")
            if callable(grid):
                grid = guarded(grid)(dict(bound.arguments, **options))
            key = self.kernel_key(kernel)
            recorded = {n: self.argument(v, f"argument {n!r} of kernel {fn.__name__}") for n, v in
                        bound.arguments.items()}
            recorded.update({n: {"value": v} for n, v in options.items()})
            self.steps.append(Launch(key, _grid(grid, fn.__name__), recorded))
        except RecordError as exc:
            self.error = str(exc)

    def kernel_key(self, kernel) -> str:
        """The recording's key for a ``@triton.jit`` function of the solution file (recorded with its
        globals, and the kernels those name, on first sight)."""
        fn = kernel.fn
        code = fn.__code__
        if code.co_filename != self.solution_path:
            raise RecordError(f"kernel {fn.__name__} is not defined in solution.py: only the solution's own "
                              f"kernels are run")
        key = f"{fn.__name__}:{code.co_firstlineno}"
        if key in self.kernels:
            return key
        self.kernels[key] = Kernel(fn.__name__, code.co_firstlineno, {}, {})  # placed first: recursion ends
        globals_ = {}
        for name in sorted(_global_names(fn)):
            value = fn.__globals__[name]
            if isinstance(value, types.ModuleType):
                globals_[name] = {"module": value.__name__}
            elif (where := _language_member(value)) is not None:
                globals_[name] = {"member": where}
            else:
                globals_[name] = self.argument(value, f"global {name!r} read by kernel {fn.__name__}", tensors=False)
        self.kernels[key] = Kernel(fn.__name__, code.co_firstlineno, _jit_options(kernel), globals_)
        return key

    def argument(self, value, where: str, tensors: bool = True) -> dict:
        import triton.language as tl

        if isinstance(value, torch.Tensor) and tensors:
            return {"tensor": self.ref(value.data_ptr(), where), "dtype": dtype_name(value.dtype)}
        if value is None or type(value) in (bool, int, float, str):
            return {"value": value}
        if isinstance(value, tl.constexpr):
            return {"constexpr": self.argument(value.value, where, tensors=False)}
        if isinstance(value, tl.dtype):
            return {"tl_dtype": value.name}
        if isinstance(value, torch.dtype):
            return {"torch_dtype": dtype_name(value)}
        if type(value) is tuple:
            return {"tuple": [self.argument(v, where, tensors) for v in value]}
        if hasattr(value, "fn") and callable(getattr(value, "run", None)) and hasattr(value, "arg_names"):
            return {"jit": self.kernel_key(value)}
        raise RecordError(f"{where} is a {type(value).__name__}: a kernel can be given only tensors, numbers, "
                          f"booleans, strings, None, dtypes, tuples of those and @triton.jit functions")

    def ref(self, address: int, where: str) -> dict:
        """Where ``address`` lies: an input's bytes, or a buffer forward allocated (the latest that holds it)."""
        for index in range(len(self.buffers) - 1, -1, -1):
            start, nbytes, _, _ = self.buffers[index]
            if start <= address < start + max(nbytes, 1):
                return {"buffer": index, "offset": address - start}
        # Inputs may share storage (views of one packed tensor): the one starting nearest below wins.
        holders = [(span[0], index) for index, span in enumerate(self.inputs)
                   if span and span[0] <= address < span[0] + max(span[1], 1)]
        if holders:
            start, index = max(holders)
            return {"input": index, "offset": address - start}
        raise RecordError(f"{where} points into neither an input nor a tensor forward allocated with torch.empty/"
                          f"zeros/full (a tensor made any other way cannot be replayed)")

    def view(self, t: torch.Tensor, where: str) -> View:
        at = self.ref(t.data_ptr(), where)
        space = "input" if "input" in at else "buffer"
        return View(Ref(space, at[space], at["offset"]), tuple(t.shape), tuple(t.stride()), dtype_name(t.dtype))

    def finish(self, outputs: tuple) -> Recording:
        """The recording of the call that returned ``outputs``; raises :class:`RecordError`."""
        if self.error:
            raise RecordError(self.error)
        views = []
        for i, out in enumerate(outputs):
            if type(out) is not torch.Tensor:
                raise RecordError(f"output {i} is a {type(out).__name__}, not a torch.Tensor")
            views.append(self.view(out, f"output {i}"))
        return Recording(tuple(Buffer(n, d, f) for _, n, d, f in self.buffers), tuple(self.steps), tuple(views),
                         dict(self.kernels))


def _extent_bytes(t: torch.Tensor) -> int:
    """Bytes from ``t``'s first element to the end of the last it spans."""
    if not t.numel():
        return 0
    return (1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))) * t.element_size()


def _fill_value(rule, args: tuple):
    if rule is None or isinstance(rule, int):
        return rule
    value = args[int(rule[-1])] if len(args) > int(rule[-1]) else None
    if type(value) in (bool, int, float):
        return value
    raise RecordError(f"a fill with {type(value).__name__} {value!r}"[:200] + " cannot be replayed: fill with a number")


def _grid(grid, kernel: str) -> tuple[int, int, int]:
    if type(grid) not in (tuple, list, torch.Size) or not 1 <= len(grid) <= 3 or \
            not all(type(g) is int for g in grid):
        raise RecordError(f"the grid of kernel {kernel} is {grid!r}"[:200] + ": a grid is 1 to 3 ints")
    return tuple(grid) + (1,) * (3 - len(grid))


def _language_member(value) -> list[str] | None:
    """``[module, name]`` when ``value`` is a public member of Triton's language bound to a global of
    its own (``from triton.language.extra.libdevice import rsqrt``), else None."""
    module, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not (isinstance(module, str) and isinstance(name, str) and module.startswith("triton.language")):
        return None
    owner = sys.modules.get(module)
    return [module, name] if owner is not None and getattr(owner, name, None) is value else None


def _global_names(fn) -> set[str]:
    """Names ``fn``'s body and annotations read that are the module's globals (parameters and locals
    excluded; default values are not read: a recorded launch passes every argument)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError) as exc:
        raise RecordError(f"the source of kernel {fn.__name__} cannot be read ({exc})") from None
    definition = tree.body[0]
    if isinstance(definition, ast.FunctionDef):
        definition.decorator_list = []  # autotune configs and the like are the host's, not the kernel's
        definition.args.defaults, definition.args.kw_defaults = [], []
    loaded = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return (loaded - set(fn.__code__.co_varnames)) & set(fn.__globals__)


def _jit_options(kernel) -> dict:
    """The triton.jit options a replay must keep: what specialises the compiled code."""
    options = {}
    for name in ("do_not_specialize", "do_not_specialize_on_alignment"):
        value = getattr(kernel, name, None) or getattr(kernel, "kwargs", {}).get(name)
        if value:
            options[name] = [v if type(v) in (int, str) else str(v) for v in value]
    noinline = getattr(kernel, "noinline", None) or getattr(kernel, "kwargs", {}).get("noinline")
    if noinline is not None:
        options["noinline"] = bool(noinline)
    return options
