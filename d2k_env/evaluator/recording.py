"""What a solution's ``forward`` did on one workload, as data: the recording the trust boundary passes.

The solution process (untrusted: assume its Python is arbitrary code) calls ``forward`` on inputs of
a workload's shapes and writes down what reached the GPU: the buffers it allocated (size and fill),
the fills it made, and each launch of its own ``@triton.jit`` kernels (which kernel, the grid, every
argument: a pointer into an input or a buffer, or a plain value). The trusted replay process
(:mod:`d2k_env.evaluator.replay`) never imports the solution: it rebuilds the kernels from the
source text the policy checked and runs this recording on the secret inputs.

Everything here was written by an untrusted process. :func:`parse` therefore accepts only the
format below, with bounds on every number and count, and raises :class:`RecordingError` naming
what is wrong; nothing in a recording is ever evaluated, only looked up.

Format (JSON):

    {"buffers": [{"nbytes": N, "dtype": D, "fill": null | number}],  # forward's allocations, in order
     "steps": [{"fill": {"at": REF, "shape": [...], "strides": [...], "dtype": D, "value": V}}
               | {"launch": {"kernel": K, "grid": [g0, g1, g2], "args": {name: ARG}}}],
     "outputs": [{"at": REF, "shape": [...], "strides": [...], "dtype": D}],
     "kernels": {K: {"name": fn, "line": L, "options": {...}, "globals": {name: VALUE}}}}

REF is ``{"input": i, "offset": bytes}`` or ``{"buffer": j, "offset": bytes}``; ARG is
``{"tensor": REF, "dtype": D}``, ``{"value": int | float | bool | str | null}``,
``{"tl_dtype": name}``, ``{"torch_dtype": name}``, ``{"constexpr": ARG}``, ``{"jit": K}`` or
``{"tuple": [ARG, ...]}``; a global VALUE is an ARG, ``{"module": name}`` or ``{"member": [module,
name]}`` (a public member of Triton's language bound to a global: ``from ... libdevice import rsqrt``).

Forward's contract: its launches depend only on the inputs' shapes, dtypes, strides and device (as
CUDA-graph capture requires), so a recording made on one set of inputs holds for any other of the
same shapes. :func:`first_difference` compares two recordings of the same workload.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# Bounds on what a recording may hold: generous for honest kernels, small enough that validating
# and replaying it is cheap and cannot exhaust the trusted process.
MAX_BYTES = 4 << 20  # the JSON text
MAX_STEPS = 4096
MAX_BUFFERS = 1024
MAX_KERNELS = 256
MAX_ARGS = 512
MAX_DIMS = 8
MAX_STRING = 256
MAX_TUPLE = 64
MAX_BUFFER_BYTES = 1 << 40  # per buffer; the allocation itself then says whether it fits
# Launch grids as CUDA bounds them.
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)

# The dtypes a tensor argument, fill or output may have (torch's names).
TORCH_DTYPES = frozenset({
    "float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool",
})
# Triton's names of its dtypes (tl.dtype(name) rebuilds each).
TL_DTYPES = frozenset({
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "fp8e4nv", "fp8e5",
    "fp8e4b15", "fp8e4b8", "fp8e5b16", "fp16", "bf16", "fp32", "fp64", "void",
})
# Modules a kernel may read as globals: Triton's language and Python's math (pure functions of
# constants, which Triton's front end evaluates at compile time).
KERNEL_MODULES = frozenset({
    "triton", "triton.language", "triton.language.math", "triton.language.extra",
    "triton.language.extra.libdevice", "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
    "math",
})
# The launch options Triton takes beside a kernel's own parameters.
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                            "launch_cooperative_grid", "launch_pdl"})
# The options of triton.jit a replayed kernel keeps.
JIT_OPTIONS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "noinline"})


class RecordingError(ValueError):
    """A recording that does not follow the format or its bounds (the message says where)."""


@dataclass(frozen=True)
class Ref:
    """A byte position in one of forward's inputs (``space="input"``) or buffers (``"buffer"``)."""
    space: str
    index: int
    offset: int


@dataclass(frozen=True)
class Buffer:
    """One allocation of forward's: its size, dtype and fill (None: torch.empty's, uninitialised)."""
    nbytes: int
    dtype: str
    fill: float | int | bool | None


@dataclass(frozen=True)
class View:
    at: Ref
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Fill:
    view: View
    value: float | int | bool


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    args: dict  # name -> ARG, as parsed (plain JSON values, validated)


@dataclass(frozen=True)
class Kernel:
    name: str  # the function's name in solution.py
    line: int  # its first line there (its first decorator's, where it has one)
    options: dict  # triton.jit's, of JIT_OPTIONS
    globals: dict  # name -> VALUE


@dataclass(frozen=True)
class Recording:
    buffers: tuple[Buffer, ...]
    steps: tuple[Fill | Launch, ...]
    outputs: tuple[View, ...]
    kernels: dict[str, Kernel]

    @property
    def launches(self) -> list[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def to_json(self) -> str:
        def view(v: View) -> dict:
            return {"at": {v.at.space: v.at.index, "offset": v.at.offset}, "shape": list(v.shape),
                    "strides": list(v.strides), "dtype": v.dtype}

        steps = [{"fill": {**view(s.view), "value": s.value}} if isinstance(s, Fill) else
                 {"launch": {"kernel": s.kernel, "grid": list(s.grid), "args": s.args}} for s in self.steps]
        return json.dumps({
            "buffers": [{"nbytes": b.nbytes, "dtype": b.dtype, "fill": b.fill} for b in self.buffers], "steps": steps,
            "outputs": [view(o) for o in self.outputs],
            "kernels": {k: {"name": v.name, "line": v.line, "options": v.options, "globals": v.globals}
                        for k, v in self.kernels.items()}})


def parse(text: str, inputs: int) -> Recording:
    """The recording in ``text`` for a workload of ``inputs`` inputs, validated (see the module
    docstring); raises :class:`RecordingError` on anything else."""
    if len(text) > MAX_BYTES:
        raise RecordingError(f"the recording is {len(text)} bytes; at most {MAX_BYTES} are read")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordingError(f"the recording is not JSON ({exc})") from None
    _keys(data, "the recording", {"buffers", "steps", "outputs", "kernels"})
    buffers = tuple(_buffer(b, i) for i, b in enumerate(_list(data["buffers"], "buffers", MAX_BUFFERS)))
    kernels_data = data["kernels"]
    if not isinstance(kernels_data, dict) or len(kernels_data) > MAX_KERNELS:
        raise RecordingError(f"kernels must be a mapping of at most {MAX_KERNELS} kernels")
    kernels = {_string(k, "a kernel key"): _kernel(v, k) for k, v in kernels_data.items()}
    for key, kernel in kernels.items():
        for name, value in kernel.globals.items():
            _check_jit_refs(value, kernels, f"global {name!r} of kernel {key!r}")
    spaces = {"input": inputs, "buffer": len(buffers)}
    steps = []
    for i, step in enumerate(_list(data["steps"], "steps", MAX_STEPS)):
        where = f"step {i}"
        if not isinstance(step, dict) or len(step) != 1:
            raise RecordingError(f"{where} must hold one fill or one launch")
        if "fill" in step:
            fill = step["fill"]
            _keys(fill, where, {"at", "shape", "strides", "dtype", "value"})
            steps.append(Fill(_view(fill, where, spaces), _number(fill["value"], f"{where}'s fill value")))
        elif "launch" in step:
            steps.append(_launch(step["launch"], where, spaces, kernels))
        else:
            raise RecordingError(f"{where} is neither a fill nor a launch")
    outputs = []
    for i, output in enumerate(_list(data["outputs"], "outputs", 64)):
        _keys(output, f"output {i}", {"at", "shape", "strides", "dtype"})
        outputs.append(_view(output, f"output {i}", spaces))
    return Recording(buffers, tuple(steps), tuple(outputs), kernels)


def first_difference(a: Recording, b: Recording) -> str | None:
    """Where two recordings of one workload (on inputs of the same shapes, other values) differ, in
    words, or None when they agree: forward's launches must not depend on the inputs' values."""
    if a.buffers != b.buffers:
        return "forward allocated other buffers"
    for i, (x, y) in enumerate(zip(a.steps, b.steps)):
        if x == y:
            continue
        if isinstance(x, Launch) and isinstance(y, Launch):
            if x.kernel != y.kernel:
                return f"step {i} launched {_kernel_name(a, x)} one time and {_kernel_name(b, y)} the other"
            if x.grid != y.grid:
                return f"step {i} ({_kernel_name(a, x)}) had grid {list(x.grid)} one time and {list(y.grid)} the other"
            names = sorted(set(x.args) | set(y.args))
            arg = next(n for n in names if x.args.get(n) != y.args.get(n))
            return (f"step {i} ({_kernel_name(a, x)}) passed {arg}={_show(x.args.get(arg))} one time and "
                    f"{_show(y.args.get(arg))} the other")
        return f"step {i} was {_step(a, x)} one time and {_step(b, y)} the other"
    if len(a.steps) != len(b.steps):
        return f"forward made {len(a.steps)} fills and launches one time and {len(b.steps)} the other"
    if a.outputs != b.outputs:
        return "forward returned other output tensors"
    if a.kernels != b.kernels:
        return "a kernel's globals or options differed"
    return None


def _step(r: Recording, step: Fill | Launch) -> str:
    if isinstance(step, Launch):
        return f"a launch of {_kernel_name(r, step)}"
    return f"a fill with {step.value!r} of {step.view.at.space} {step.view.at.index}"


def _kernel_name(r: Recording, launch: Launch) -> str:
    k = r.kernels.get(launch.kernel)
    return f"kernel {k.name}" if k else f"kernel {launch.kernel}"


def _show(arg) -> str:
    if isinstance(arg, dict) and "value" in arg:
        return repr(arg["value"])
    if isinstance(arg, dict) and "tensor" in arg:
        at = arg["tensor"]
        space = "input" if "input" in at else "buffer"
        return f"a pointer into {space} {at.get(space)} at byte {at.get('offset')}"
    return json.dumps(arg)


def _keys(value, where: str, keys: set[str]) -> None:
    if not isinstance(value, dict) or set(value) != keys:
        raise RecordingError(f"{where} must have exactly the keys {sorted(keys)}")


def _list(value, where: str, limit: int) -> list:
    if not isinstance(value, list) or len(value) > limit:
        raise RecordingError(f"{where} must be a list of at most {limit} entries")
    return value


def _int(value, where: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise RecordingError(f"{where} must be an integer in [{low}, {high}], not {value!r}"[:300])
    return value


def _string(value, where: str) -> str:
    if type(value) is not str or not 0 < len(value) <= MAX_STRING:
        raise RecordingError(f"{where} must be a string of 1 to {MAX_STRING} characters")
    return value


def _number(value, where: str) -> float | int | bool:
    if type(value) in (bool, int):
        return _int(int(value), where, -2 ** 63, 2 ** 64 - 1) if type(value) is int else value
    if type(value) is float and not math.isnan(value):
        return value
    raise RecordingError(f"{where} must be a number, not {value!r}"[:300])


def _buffer(value, i: int) -> Buffer:
    where = f"buffer {i}"
    _keys(value, where, {"nbytes", "dtype", "fill"})
    if value["dtype"] not in TORCH_DTYPES:
        raise RecordingError(f"{where} has an unknown dtype")
    fill = value["fill"]
    return Buffer(_int(value["nbytes"], f"{where}'s size", 0, MAX_BUFFER_BYTES), value["dtype"],
                  None if fill is None else _number(fill, f"{where}'s fill"))


def _ref(value, where: str, spaces: dict[str, int]) -> Ref:
    if not isinstance(value, dict) or len(value) != 2 or "offset" not in value:
        raise RecordingError(f"{where} must name an input or a buffer and an offset")
    (space,) = set(value) - {"offset"}
    if space not in spaces:
        raise RecordingError(f"{where} points into neither an input nor a buffer")
    index = _int(value[space], f"{where}'s {space}", 0, spaces[space] - 1) if spaces[space] else None
    if index is None:
        raise RecordingError(f"{where} points into {space} which forward does not have")
    return Ref(space, index, _int(value["offset"], f"{where}'s offset", 0, MAX_BUFFER_BYTES))


def _view(value, where: str, spaces: dict[str, int]) -> View:
    if not isinstance(value, dict) or not {"at", "shape", "strides", "dtype"} <= set(value):
        raise RecordingError(f"{where} must give a position, a shape, strides and a dtype")
    shape = tuple(_int(n, f"{where}'s shape", 0, 2 ** 40) for n in _list(value["shape"], f"{where}'s shape", MAX_DIMS))
    strides = tuple(_int(s, f"{where}'s strides", 0, 2 ** 40)
                    for s in _list(value["strides"], f"{where}'s strides", MAX_DIMS))
    if len(shape) != len(strides):
        raise RecordingError(f"{where} has {len(shape)} sizes and {len(strides)} strides")
    dtype = value["dtype"]
    if dtype not in TORCH_DTYPES:
        raise RecordingError(f"{where} has an unknown dtype {str(dtype)[:40]!r}")
    return View(_ref(value["at"], where, spaces), shape, strides, dtype)


def _arg(value, where: str, spaces: dict[str, int] | None, depth: int = 0):
    """A validated launch argument or global value (returned as given: plain JSON)."""
    if depth > 4 or not isinstance(value, dict) or len(value) not in (1, 2):
        raise RecordingError(f"{where} is not an argument of the format")
    kind = next(iter(value))
    if kind == "tensor" and spaces is not None:
        _keys(value, where, {"tensor", "dtype"})
        _ref(value["tensor"], where, spaces)
        if value["dtype"] not in TORCH_DTYPES:
            raise RecordingError(f"{where} has an unknown dtype")
    elif kind == "value" and len(value) == 1:
        v = value["value"]
        if v is not None and type(v) is not str:
            _number(v, where)
        elif type(v) is str and len(v) > MAX_STRING:
            raise RecordingError(f"{where} is a string of more than {MAX_STRING} characters")
    elif kind == "tl_dtype" and len(value) == 1:
        if value["tl_dtype"] not in TL_DTYPES:
            raise RecordingError(f"{where} names an unknown Triton dtype")
    elif kind == "torch_dtype" and len(value) == 1:
        if value["torch_dtype"] not in TORCH_DTYPES:
            raise RecordingError(f"{where} names an unknown torch dtype")
    elif kind == "constexpr" and len(value) == 1:
        _arg(value["constexpr"], where, None, depth + 1)
    elif kind == "jit" and len(value) == 1:
        _string(value["jit"], where)
    elif kind == "tuple" and len(value) == 1:
        for item in _list(value["tuple"], where, MAX_TUPLE):
            _arg(item, where, spaces, depth + 1)
    elif kind == "member" and spaces is None and len(value) == 1:
        member = value["member"]
        if not (isinstance(member, list) and len(member) == 2 and member[0] in KERNEL_MODULES - {"math"} and
                type(member[1]) is str and member[1].isidentifier() and not member[1].startswith("_")):
            raise RecordingError(f"{where} is not a public member of Triton's language")
    elif kind == "module" and spaces is None and len(value) == 1:
        if value["module"] not in KERNEL_MODULES:
            raise RecordingError(f"{where} is the module {str(value['module'])[:60]!r}: a kernel may read "
                                 f"only {', '.join(sorted(KERNEL_MODULES))}")
    else:
        raise RecordingError(f"{where} is not an argument of the format")
    return value


def _check_jit_refs(value, kernels: dict, where: str) -> None:
    if isinstance(value, dict):
        if "jit" in value and value["jit"] not in kernels:
            raise RecordingError(f"{where} names kernel {str(value['jit'])[:60]!r}, which the recording lacks")
        for v in value.values():
            _check_jit_refs(v, kernels, where)
    elif isinstance(value, list):
        for v in value:
            _check_jit_refs(v, kernels, where)


def _kernel(value, key: str) -> Kernel:
    where = f"kernel {key!r}"
    _keys(value, where, {"name", "line", "options", "globals"})
    name = _string(value["name"], f"{where}'s name")
    if not name.isidentifier():
        raise RecordingError(f"{where}'s name is not an identifier")
    options = value["options"]
    if not isinstance(options, dict) or not set(options) <= JIT_OPTIONS:
        raise RecordingError(f"{where}'s options must be among {sorted(JIT_OPTIONS)}")
    for option, v in options.items():
        if option == "noinline":
            if type(v) is not bool:
                raise RecordingError(f"{where}'s noinline must be a boolean")
        else:
            for item in _list(v, f"{where}'s {option}", MAX_ARGS):
                if type(item) not in (int, str) or (type(item) is str and not item.isidentifier()):
                    raise RecordingError(f"{where}'s {option} must list parameter indices or names")
    globals_ = value["globals"]
    if not isinstance(globals_, dict) or len(globals_) > MAX_ARGS:
        raise RecordingError(f"{where}'s globals must be a mapping")
    for g, v in globals_.items():
        if not isinstance(g, str) or not g.isidentifier() or g.startswith("__"):
            raise RecordingError(f"{where} has a global with a name that is not a plain identifier")
        _arg(v, f"{where}'s global {g!r}", None)
    return Kernel(name, _int(value["line"], f"{where}'s line", 1, 10 ** 6), options, globals_)


def _launch(value, where: str, spaces: dict[str, int], kernels: dict[str, Kernel]) -> Launch:
    _keys(value, where, {"kernel", "grid", "args"})
    if value["kernel"] not in kernels:
        raise RecordingError(f"{where} launches a kernel the recording does not describe")
    grid = _list(value["grid"], f"{where}'s grid", 3)
    if not grid:
        raise RecordingError(f"{where}'s grid is empty")
    dims = tuple(_int(g, f"{where}'s grid", 0, limit) for g, limit in zip(grid, GRID_LIMITS))
    args = value["args"]
    if not isinstance(args, dict) or len(args) > MAX_ARGS:
        raise RecordingError(f"{where}'s arguments must be a mapping")
    for name, arg in args.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise RecordingError(f"{where} passes an argument whose name is not a plain identifier")
        _arg(arg, f"{where}'s argument {name!r}", spaces)
        _check_jit_refs(arg, kernels, f"{where}'s argument {name!r}")
    return Launch(value["kernel"], dims + (1,) * (3 - len(dims)), args)
