"""The trusted side of the trust boundary: a solution's recorded launches, run without its Python.

The replay process never imports the solution. It gets the source text the policy checked (from
the evaluator, never from the solution process) and, per workload, the recording the solution
process wrote (:mod:`d2k_env.evaluator.recording`, validated by :func:`~recording.parse`). It rebuilds
each recorded kernel from that text: the top-level ``def`` of that name and line, with its
decorators and default values dropped, checked to be Triton's language
(:mod:`d2k_env.evaluator.kernel_language`), compiled from the unparsed checked tree (the only text
Triton then reads of it), in a namespace holding only Triton's modules, the other rebuilt kernels,
the recorded constants and a handful of builtins. Then :class:`Replay` runs the recorded steps on any inputs of the workload's
shapes: it allocates the buffers, makes the fills and launches, and returns the recorded outputs.

What this guarantees: whatever the solution's Python did in its own process, what is checked and
timed is the work of kernels defined in the checked source, launched as recorded. On the GPU the
kernels are compiled here by Triton's front end (into the evaluator's trusted Triton cache, which
no solution process writes). On the CPU interpreter the kernel body runs as Python here: that path
trusts the language check to keep it inside Triton's language.
"""

from __future__ import annotations

import __future__
import ast
import importlib
import linecache

import torch

from d2k_env.evaluator import kernel_language
from d2k_env.evaluator.recording import Buffer, Fill, Kernel, Recording, Ref, View
from d2k_env.evaluator.source_text import tokenizer_lines

def poison_value(dtype: torch.dtype):
    """What uninitialised buffers hold on the checked run: NaN in floats, and in integers a value no
    task uses as padding or a sentinel (-1, 0 and small ids are all common)."""
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max // 3 + 1


class ReplayError(Exception):
    """A recording that cannot be replayed on this source (the message is for the solution's author)."""


class RebuiltKernels(dict):
    """Recording key -> jit, as :func:`rebuild_kernels` built them; ``trees`` holds each key's checked
    tree (the bare ``def`` the language check passed, which is the text that runs)."""

    def __init__(self, jitted: dict, trees: dict[str, ast.FunctionDef]):
        super().__init__(jitted)
        self.trees = trees


def rebuild_kernels(source: str, path: str, recording: Recording) -> RebuiltKernels:
    """The recording's kernels rebuilt from ``source`` (the checked text of the file at ``path``): key -> jit,
    with each key's checked tree beside (:class:`RebuiltKernels`)."""
    import triton

    try:
        tree = ast.parse(source, path)
    except SyntaxError as exc:
        raise ReplayError(f"solution.py does not parse: {exc}") from None
    defs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            defs[(node.name, first)] = node
    # A module name: Triton's compiler reads each global's __module__ as a string (the interpreter does not).
    namespace: dict = {"__builtins__": kernel_language.builtins_namespace(), "__name__": "d2k_replayed_solution"}
    chosen = {}
    for key, kernel in recording.kernels.items():
        node = defs.get((kernel.name, kernel.line))
        if node is None:
            raise ReplayError(f"a launched kernel, {kernel.name} (line {kernel.line}), is not a function defined at "
                              f"the top level of solution.py: only such kernels are run")
        if kernel.name in chosen and chosen[kernel.name] is not node:
            raise ReplayError(f"two kernels named {kernel.name} were launched: give each kernel its own name")
        chosen[kernel.name] = node
        for name, value in kernel.globals.items():
            decoded = _global(value)
            if name in namespace and not _same(namespace[name], decoded):
                raise ReplayError(f"the global {name} had two values while forward ran")
            namespace[name] = decoded
    launched = {recording.kernels[step.kernel].name for step in recording.launches}
    plain, trees = [], {}
    for node in chosen.values():
        # Decorators are the host's; default values too (a recorded launch passes every argument).
        bare = ast.FunctionDef(**{f: getattr(node, f) for f in node._fields if f not in ("decorator_list", "args")},
                               decorator_list=[], args=ast.arguments(**{
                                   **{f: getattr(node.args, f) for f in node.args._fields},
                                   "defaults": [], "kw_defaults": [None] * len(node.args.kwonlyargs)}))
        plain.append(ast.copy_location(bare, node))
        trees[node.name] = bare
        if problems := kernel_language.problems(bare, namespace, launched=node.name in launched):
            raise ReplayError("\n".join(problems[:5]))
    # What runs is the text of the checked trees themselves (ast.unparse): Triton re-reads a kernel's text
    # through linecache (the interpreter even executes its def again), so that text holds no decorator,
    # no default and nothing else the check did not see. Each def keeps its line where it can, so
    # messages point near the line of solution.py.
    text, line = "", 1
    for node in plain:
        code = ast.unparse(node) + "\n"
        start = max(line, node.lineno)
        text += "\n" * (start - line) + code
        line = start + code.count("\n")
    linecache.cache[path] = (len(text), None, tokenizer_lines(text), path)
    # A __future__ import is a compiler flag here: as a statement it would import at run time.
    flags = sum(getattr(__future__, alias.name).compiler_flag for n in tree.body
                if isinstance(n, ast.ImportFrom) and n.module == "__future__" for alias in n.names
                if hasattr(__future__, alias.name))
    exec(compile(text, path, "exec", flags=flags, dont_inherit=True), namespace)
    jitted = {}
    for key, kernel in recording.kernels.items():
        options = {k: (tuple(v) if isinstance(v, list) else v) for k, v in kernel.options.items()}
        jitted[key] = triton.jit(namespace[kernel.name], **options)
    for key, kernel in recording.kernels.items():
        namespace[kernel.name] = jitted[key]  # a kernel calls another through its global name
    for name, value in list(namespace.items()):
        if isinstance(value, _JitRef):
            namespace[name] = jitted[value.key]
    return RebuiltKernels(jitted, {key: trees[kernel.name] for key, kernel in recording.kernels.items()})


def kernels_using_dot(recording: Recording, trees: dict[str, ast.FunctionDef]) -> frozenset[str]:
    """The names of the launched kernels whose checked tree (``trees``: recording key -> tree, as
    :class:`RebuiltKernels` holds them), or that of a jit helper reachable from it through the
    recording's kernel table, calls ``tl.dot``: an attribute call ``<x>.dot(...)`` where ``<x>`` is a
    global bound to ``triton.language`` (or ``<t>.language`` with ``<t>`` bound to ``triton``), or
    a call of a global bound to the member ``triton.language.dot``. What the recording names is what
    the replay runs, so the answer is the trusted side's own, whatever the solution's Python did."""
    calls = {key: _calls_dot(trees[key], kernel) for key, kernel in recording.kernels.items()}
    found = set()
    for launch in recording.launches:
        seen, todo = set(), [launch.kernel, *_jit_keys(launch.args)]
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            if calls[key]:
                found.add(recording.kernels[launch.kernel].name)
                break
            todo += _jit_keys(recording.kernels[key].globals)
    return frozenset(found)


def _calls_dot(tree: ast.FunctionDef, kernel: Kernel) -> bool:
    """Whether ``tree`` (the checked def of ``kernel``) calls ``tl.dot`` by one of the names its globals bind."""
    modules = {name: v["module"] for name, v in kernel.globals.items() if "module" in v}
    dots = {name for name, v in kernel.globals.items() if v.get("member") == ["triton.language", "dot"]}

    def language(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return modules.get(node.id) == "triton.language"
        return isinstance(node, ast.Attribute) and node.attr == "language" and \
            isinstance(node.value, ast.Name) and modules.get(node.value.id) == "triton"

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "dot" and language(f.value):
                return True
            if isinstance(f, ast.Name) and f.id in dots:
                return True
    return False


def _jit_keys(value) -> list[str]:
    """The recording keys of the kernels a global or an argument names (``{"jit": K}``, at any depth)."""
    if isinstance(value, dict):
        return ([value["jit"]] if isinstance(value.get("jit"), str) else []) + \
            [k for v in value.values() for k in _jit_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _jit_keys(v)]
    return []


class Replay:
    """Runs ``recording`` with ``kernels`` (from :func:`rebuild_kernels`) on ``device``."""

    def __init__(self, recording: Recording, kernels: dict, device: torch.device):
        self.recording, self.kernels, self.device = recording, kernels, device

    def __call__(self, *inputs, poison: bool = False) -> tuple:
        """The recorded outputs of one replay on ``inputs``; ``poison`` fills uninitialised buffers
        with :func:`poison_value` first (the checked run: a kernel that reads what it never wrote fails)."""
        buffers = [self._allocate(b, poison) for b in self.recording.buffers]
        for i, step in enumerate(self.recording.steps):
            if isinstance(step, Fill):
                self._view(step.view, inputs, buffers, f"step {i}'s fill").fill_(step.value)
                continue
            args = {name: self._argument(arg, inputs, buffers, f"step {i}'s argument {name}")
                    for name, arg in step.args.items()}
            try:
                self.kernels[step.kernel].run(grid=step.grid, warmup=False, **args)
            except TypeError as exc:  # the recorded arguments do not fit the kernel's parameters
                raise ReplayError(f"step {i} ({self.recording.kernels[step.kernel].name}): {exc}") from None
        return tuple(self._view(v, inputs, buffers, f"output {i}") for i, v in enumerate(self.recording.outputs))

    def _allocate(self, buffer: Buffer, poison: bool) -> torch.Tensor:
        dtype = getattr(torch, buffer.dtype)
        size = buffer.nbytes // dtype.itemsize
        t = torch.empty(size, dtype=dtype, device=self.device)
        if buffer.fill is not None:
            t.fill_(buffer.fill)
        elif poison:
            t.fill_(poison_value(dtype))
        return t

    def _tensor(self, ref: Ref, dtype: torch.dtype, inputs: tuple, buffers: list, where: str,
                shape: tuple | None = None, strides: tuple | None = None) -> torch.Tensor:
        """A tensor of ``dtype`` at ``ref``: the given view, or (for a launch's pointer) every element
        from there to the end of the storage."""
        if ref.space == "input":
            if ref.index >= len(inputs) or not isinstance(inputs[ref.index], torch.Tensor):
                raise ReplayError(f"{where} points into input {ref.index}, which is not a tensor")
            base = inputs[ref.index]
        else:
            base = buffers[ref.index]
        storage = base.untyped_storage()
        position = base.storage_offset() * base.element_size() + ref.offset
        item = dtype.itemsize
        if position % item:
            raise ReplayError(f"{where} is a {dtype} pointer at byte {ref.offset}, not a multiple of its size")
        if shape is None:
            shape, strides = ((storage.nbytes() - position) // item,), (1,)
        span = (1 + sum((n - 1) * s for n, s in zip(shape, strides))) * item if all(shape) else 0
        if position + span > storage.nbytes():
            raise ReplayError(f"{where} runs past the end of the {ref.space} it points into")
        return torch.empty(0, dtype=dtype, device=base.device).set_(storage, position // item, shape, strides)

    def _view(self, view: View, inputs: tuple, buffers: list, where: str) -> torch.Tensor:
        return self._tensor(view.at, getattr(torch, view.dtype), inputs, buffers, where, view.shape, view.strides)

    def _argument(self, arg: dict, inputs: tuple, buffers: list, where: str):
        if "tensor" in arg:
            at = arg["tensor"]
            space = "input" if "input" in at else "buffer"
            return self._tensor(Ref(space, at[space], at["offset"]), getattr(torch, arg["dtype"]), inputs, buffers,
                                where)
        if "tuple" in arg:
            return tuple(self._argument(a, inputs, buffers, where) for a in arg["tuple"])
        if "jit" in arg:
            return self.kernels[arg["jit"]]
        return _global(arg)


class _JitRef:
    """A global naming another recorded kernel, until the kernels are built."""

    def __init__(self, key: str):
        self.key = key

    def __eq__(self, other) -> bool:
        return isinstance(other, _JitRef) and other.key == self.key

    __hash__ = None


def _global(value: dict):
    """A recorded constant, module or kernel reference as the object it names."""
    import triton.language as tl

    if "module" in value:
        return importlib.import_module(value["module"])
    if "member" in value:
        module, name = value["member"]
        member = getattr(importlib.import_module(module), name, None)
        if member is None:
            raise ReplayError(f"{module}.{name} does not exist")
        return member
    if "value" in value:
        return value["value"]
    if "tl_dtype" in value:
        return tl.dtype(value["tl_dtype"])
    if "torch_dtype" in value:
        return getattr(torch, value["torch_dtype"])
    if "constexpr" in value:
        return tl.constexpr(_global(value["constexpr"]))
    if "tuple" in value:
        return tuple(_global(v) for v in value["tuple"])
    if "jit" in value:
        return _JitRef(value["jit"])
    raise ReplayError(f"a global of kind {sorted(value)} cannot be a kernel's")


def _same(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - a comparison Triton's objects do not support: not the same
        return a is b
