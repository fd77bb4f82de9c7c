"""Static policy for solution.py, checked on the syntax tree before anything runs.

A solution must define ``forward``, and ``forward`` must (directly or through helpers defined in
the file) launch a ``@triton.jit`` kernel defined in the file. Host code may use torch only for
what the task allows (allocation, views, reshapes, shape and dtype queries): the work itself
belongs in Triton kernels. Everything that could reach the harness (introspection, dynamic
import, processes, threads, files, streams and graphs) is refused. Kernel bodies may call Triton's
functions and tensor methods only: the GPU could compile nothing else, and only the CPU
interpreter would run it as Python. Each violation names its rule and line; any scores 0.

What each rule refuses, and what an honest solution does instead, is said once, in the rule
registry (rules.py), which the verdicts, docs/security.md and the prompt read. Below: how this module checks it.

==================  ===========================================================================
rule                how it is checked here
==================  ===========================================================================
[syntax]            a file that does not parse or nests too deeply to be checked
[source-size]       sources over 256 KB, before parsing
[source-text]       characters that end a line for str.splitlines/linecache but not for Python's
                    tokenizer (\\x0b \\x0c \\x1c \\x1d \\x1e \\x85 \\u2028 \\u2029, a lone \\r), anywhere:
                    Triton re-reads kernel text by line number (source_text.py)
[no-kernel]         a ``forward`` that reaches no kernel of the file (the launch graph follows every
                    module-level function a reachable one names; a launch may go through a local
                    bound only to kernels, ``kernel = _k``); a kernel is decorated with
                    ``triton.jit`` itself, with only ``autotune``/``heuristics`` besides; ``forward``
                    bound other than once, by a def or an alias of one (``forward = my_op``)
[forbidden-import]  modules other than torch, triton, math, itertools, ``functools.partial``/
                    ``reduce``; the baseline, reference and ``d2k_env``; ``from`` imports of dunders,
                    frames, system modules or forbidden builtins; Triton's non-kernel subpackages
                    (runtime, compiler, backends, knobs, testing, tools); relative and star imports
[triton-internals]  the same reached through attribute chains: of Triton only ``jit``,
                    ``autotune``, ``heuristics``, ``Config``, ``cdiv``, ``next_power_of_2`` and
                    ``triton.language`` (with its math, extra and libdevice modules)
[torch-work]        torch calls outside the task's allow-list; tensor methods called *or read* other
                    than views, reshapes and metadata; in kernel bodies torch, calls of arguments,
                    item assignment, ``.handle``/``.data``/``.base``/``.type``, and Python doing the
                    arithmetic (comprehensions, displays, ``math.*``, ``int``/``float``/``bool`` of
                    values)
[introspection]     forbidden builtins (``eval``, ``exec``, ``getattr``, ``type``, ``open``, ``id``,
                    ``hash``, ...), dunder, frame and code-object attributes, ``_private``
                    attributes, a kernel object's attributes in host code, ``global``/``nonlocal``
[tampering]         assigning or deleting any attribute, but ``self.name = ...`` in a class's ``__init__``
[module-rebinding]  a module used other than as ``module.name`` (stored, passed, iterated); names
                    bound by imports, and tl/triton/torch/math, rebound; ``match`` statements
                    (their capture patterns rebind names)
[unbound-name]      a loaded name neither bound in the file nor an allowed builtin (the interpreter
                    copies its own globals, numpy among them, into the module)
[class-definition]  ``class`` statements other than records (dataclass, NamedTuple) and module-level op
                    classes, and dunder methods but ``__init__``/``__call__``: ``__getattr__``,
                    ``__bool__``, ``__len__`` would run host code inside a launch
[hidden-state]      state kept between calls: module-level containers aliased, passed or given
                    anything but read-only method calls, mutable default arguments, containers bound
                    into a functools.partial, module-level iterators, import-time code other than
                    pure helpers (no module-level tensors), constants that are not constant expressions
                    (the numbers of a module-level ``torch.finfo(<dtype>)`` are: ``fp8_info.max``)
[kernel-source]     a line starting with ``def`` in a jit function other than its own (the
                    interpreter re-reads the source and starts at the last such line),
                    ``triton.jit``/``autotune``/``heuristics`` anywhere but a decorator list, and
                    kernels defined inside functions (the worker verifies kernels' source at load)
[try-except]        ``try``/``except``: a failing kernel must fail, not fall back. Allowed: an import
                    fallback at module level (``try: <imports> except ImportError: <imports,
                    literals, imported names>``, both branches binding the same names), checked as
                    each branch would run
[gpu-compile]       kernel code Triton's GPU compiler refuses whatever the values (no visitor for the node:
                    break, continue, lambda, :=, del, raise; chained comparisons, ``in``, ``@``; loops
                    over anything but range/tl.range/tl.static_range; loop else; return in a loop;
                    a value returned from a launched kernel):
                    the interpreter would run it. Value-dependent refusals (``if`` on a block tensor, a
                    float loop bound; ``bool``, ``abs``) are the interpreter's (interpreter_patch.py)
[module-dunder]     binding, rebinding or deleting a dunder name (``__name__ = "__main__"`` ran the
                    ``if __name__ == "__main__":`` block, which the import-time rules skip, at import)
[format-string]     ``.format``/``.format_map`` on anything but a string literal, and literals whose
                    fields name an attribute or an index (``"{0.__class__}"``, ``"{0[k]}"``): str.format
                    walks them with getattr/getitem, past every attribute rule
==================  ===========================================================================

The body of ``if __name__ == "__main__":`` at module level is a self-test that never runs (the worker
names the module ``solution``, and no binding of ``__name__`` is allowed): it is left out of the
checks, and nothing it binds counts as bound elsewhere (_executions).

The checker fails closed: a file it cannot analyse is refused, never a crash. The exploit each
rule stops is in tests/security/ (a folder per threat class, run by tests/test_security.py).
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import itertools
import re
import string
import symtable
import sys
import types
from dataclasses import dataclass

import torch
import triton.language as _tl
import triton.runtime.interpreter as _interpreter

from d2k_env.evaluator.rules import Violation
from d2k_env.evaluator.source_text import text_problems, tokenizer_lines
from d2k_env.evaluator.triton_compat import (GPU_BINOPS, GPU_COMPARES, KERNEL_OBJECT_API, TRITON_METHODS,
                                             gpu_unsupported_nodes)

# Few and small on purpose: pure helper modules re-export escape hatches (enum.bltns is builtins,
# operator.attrgetter takes dunder names as strings, functools.update_wrapper sets attributes,
# functools.lru_cache replays outputs keyed by argument identity).
def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


ALLOWED_MODULES = frozenset({"torch", "triton", "math", "itertools", "functools", "__future__", "typing",
                             "dataclasses", "logging", "warnings", "contextlib"})
# What honest kernels use of the standard library, no more: annotations (not get_type_hints or
# ForwardRef, which evaluate strings), frozen records, a module logger (no handlers, files or
# configuration), warnings, contextlib's no-op context (a device guard's stand-in), and functools'
# caches (what they hold is checked at run time: no tensor, and nothing that changes with calls;
# see kept_state.py).
RESTRICTED_MODULE_NAMES = {
    "functools": frozenset({"partial", "reduce", "lru_cache", "cache", "wraps"}),
    "typing": frozenset({"Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Iterable", "Iterator",
                         "List", "Literal", "Mapping", "NamedTuple", "Optional", "Sequence", "Set", "Tuple", "Type",
                         "TypeVar", "Union", "cast", "overload", "TYPE_CHECKING"}),
    "dataclasses": frozenset({"dataclass", "field", "fields", "replace", "asdict", "astuple"}),
    "logging": frozenset({"getLogger", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "Logger"}),
    "warnings": frozenset({"warn"}),
    "contextlib": frozenset({"nullcontext"}),
}
# Builtins a Triton kernel body may name (the interpreter runs bodies as Python: anything else
# reachable from a kernel could do the work outside Triton).
KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance",
                             "True", "False", "None"})
# Methods that mutate a container: host code may not keep state between calls (output replay).
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
                              "add", "discard", "remove", "sort", "reverse", "difference_update",
                              "intersection_update", "symmetric_difference_update"})
# A kernel object's own API (JITFunction, Autotuner, Heuristics): hooks, warm-ups, caches. Host
# code launches kernels; it never calls these on one. KERNEL_OBJECT_API is a fixed list (triton_compat.py).

# Attribute names that lead out of the sandbox whatever object they hang off: interpreter frames
# and code objects (a frame walk reaches the harness), and modules that other modules re-export
# (torch.os, torch.sys, ...).
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await",
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "co_code",
    "co_consts", "cell_contents", "os", "sys", "builtins", "importlib", "inspect", "gc", "ctypes", "subprocess",
    "threading", "multiprocessing", "signal", "socket", "shutil", "pathlib", "io", "pickle", "marshal", "modules",
})

# Builtins that reach interpreter internals, files or code objects, or dodge the checks above; as
# attribute names too (builtins.getattr reached through any module is still getattr).
FORBIDDEN_BUILTINS = frozenset({"__import__", "eval", "exec", "compile", "open", "getattr", "setattr", "delattr",
                                "globals", "locals", "vars", "breakpoint", "input", "exit", "quit"})

# torch attributes any solution may use: types, dtypes and device queries.
ALWAYS_ALLOWED_TORCH = frozenset({
    "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "is_tensor",
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "int32", "int", "int64", "long", "bool",
    "cuda.get_device_properties", "cuda.current_device", "cuda.device_count", "cuda.is_available",
    "cuda.get_device_capability",
    # No device work, whatever the arguments: a device context, autograd switches, version strings.
    "cuda.device", "no_grad", "inference_mode", "version",
})
# torch names allowed with everything under them (torch.version.cuda.split(".")).
TORCH_ALLOWED_PREFIXES = frozenset({"version"})

# Tensor methods host code may call: views, reshapes and shape/layout queries. Every other
# method torch.Tensor has computes, copies, synchronises or mutates.
ALLOWED_TENSOR_METHODS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "contiguous", "is_contiguous", "stride", "size", "dim", "ndimension",
    "numel", "nelement", "element_size", "data_ptr", "storage_offset", "get_device", "unsqueeze", "squeeze",
    "flatten", "unflatten", "transpose", "permute", "t", "expand", "expand_as", "as_strided", "narrow", "select",
    "unbind", "chunk", "split", "movedim", "new_empty", "new_empty_strided", "is_floating_point",
    "to",  # a .to() that changes nothing dispatches nothing; one that copies is [torch-work] at run time
})
TENSOR_METHODS = frozenset(n for n in dir(torch.Tensor) if not n.startswith("__"))

# A kernel: decorated with triton.jit, and otherwise only with these (resolved through the imports).
KERNEL_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})

# The part of triton a kernel author needs: top-level helpers, and triton.language (with its
# submodules: math, extra, libdevice, ...). Everything else in triton (runtime, compiler, backends,
# knobs, testing, tools, profiler) builds, loads or runs code on the host.
TRITON_API = frozenset({"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language"})
TRITON_LANGUAGE = "triton.language"
# Plain values triton.language may hold besides its own objects (its number and string constants).
PLAIN_VALUES = (int, float, bool, str, bytes, complex, type(None))
# Objects of triton.language defined outside it that kernels use (tl.maximum(..., propagate_nan=...)).
TRITON_FOREIGN_OK = frozenset({"PropagateNan"})

# Methods a kernel body may call on a value: those of Triton's tensors, dtypes, descriptors and
# constexprs (a torch tensor smuggled in as a tl.constexpr would have torch's, e.g. copy_).
# TRITON_METHODS is a fixed list (triton_compat.py: Triton 3.6's), not read off the installed Triton.

# Builtins host code may name. The rest reach classes (type, object, super, property, ...),
# raw memory (memoryview, bytearray) or the interpreter (dir, help, ...).
ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "complex", "dict", "divmod",
    "enumerate", "filter", "float", "format", "frozenset", "hasattr", "hex", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord", "pow", "print", "range",
    "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip", "Ellipsis",
    "NotImplemented", "True", "False", "None", "staticmethod", "property",
} | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)})
MODULE_GLOBALS = frozenset({"__name__"})  # module globals (not builtins) a solution may read
MODULE_DUNDERS_BOUND = frozenset({"__all__"})  # module dunders a solution may bind: inert lists of names

# Attributes host code may read off a tensor without calling them (besides ALLOWED_TENSOR_METHODS):
# read-only metadata.
ALLOWED_TENSOR_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "is_meta", "layout", "itemsize", "nbytes", "T", "mT",
    "requires_grad", "is_leaf",
    "type", "index",  # read, not called: device.type and device.index (a call of .type() converts, and is refused)
})
# Attributes host code may never name, whatever the object (and any _private attribute): host
# access to a tensor's memory (numpy views, lists, storages and their file I/O), autograd state,
# and the interpreter's numpy buffers.
HOST_FORBIDDEN_ATTRIBUTES = frozenset({
    "numpy", "tolist", "untyped_storage", "storage", "typed_storage", "from_file", "from_buffer", "tofile",
    "tobytes", "fromfile", "dump", "dumps", "data", "grad", "handle", "share_memory_",
})
# Attributes a kernel body may never name: under the interpreter a Triton tensor's .handle.data is a
# numpy array, and .type/.base/.data reach torch or numpy objects smuggled in as constexprs.
KERNEL_FORBIDDEN_ATTRIBUTES = frozenset({"handle", "data", "base", "type"})
# Non-method attributes of Triton tensors a kernel may read (set per instance, so not in TRITON_METHODS).
TRITON_INSTANCE_ATTRIBUTES = frozenset({"shape", "dtype", "numel", "T", "value"})
# Results of these calls are metadata, never tensors: host code may read any attribute of them
# (torch.finfo(t).max, torch.cuda.get_device_properties(0).multi_processor_count).
METADATA_CALLS = frozenset({"torch.finfo", "torch.iinfo", "torch.device", "torch.cuda.get_device_properties",
                            "torch.cuda.get_device_capability", "triton.Config"})
# Attributes whose values are metadata objects (x.device.type, x.dtype.itemsize, x.shape.numel).
METADATA_ATTRIBUTES = frozenset({"device", "dtype", "shape", "layout"})

# Functions module-level code may call (at import, outside any function): pure ones that make
# numbers, containers of them, launch configurations and decorators, never a tensor or an object
# that could carry one between calls (resolved through the imports; builtins only when not rebound).
MODULE_LEVEL_BUILTINS = frozenset({
    "abs", "all", "any", "bin", "bool", "chr", "complex", "dict", "divmod", "enumerate", "filter", "float",
    "format", "frozenset", "hasattr", "hex", "int", "isinstance", "len", "list", "map", "max", "min", "oct", "ord",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
} | {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)})
MODULE_LEVEL_CALLS = frozenset({
    "triton.jit", "triton.autotune", "triton.heuristics", "triton.Config", "triton.cdiv", "triton.next_power_of_2",
    "torch.finfo", "torch.iinfo", "torch.device", "torch.cuda.get_device_properties",
    "torch.cuda.get_device_capability", "torch.cuda.current_device", "torch.cuda.device_count",
    "torch.cuda.is_available", "torch.no_grad", "torch.inference_mode", "functools.partial", "functools.reduce", "functools.lru_cache", "functools.cache",
    "functools.wraps", "dataclasses.dataclass", "dataclasses.field", "logging.getLogger", "typing.TypeVar",
    "typing.cast",
})
# Builtins a module constant may be computed with (float('inf'), int(1e6), max(1, 2), ...).
CONSTANT_BUILTINS = frozenset({"float", "int", "bool", "abs", "min", "max", "round", "pow", "complex"})

# Names Triton's interpreter copies into a kernel's module globals at the first launch (those the
# module does not bind yet), with their values.
INTERPRETER_GLOBALS = {k: v for k, v in vars(_interpreter).items() if not k.startswith("__")}
# Names that may never be rebound, whether imported or not.
MODULE_NAMES = frozenset({"tl", "triton", "torch", "math"})


def _dotted(node: ast.AST) -> str | None:
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_MISSING = object()


def _lookup(full: str):
    """The object a dotted name of an allowed module (not torch) names, importing nothing outside
    triton.language; _MISSING when it cannot be found."""
    root, *rest = full.split(".")
    if root not in ALLOWED_MODULES or root == "torch":
        return _MISSING
    try:
        obj = importlib.import_module(root)
    except ImportError:
        return _MISSING
    for i, part in enumerate(rest):
        if _is_dunder(part):
            return _MISSING
        nxt = getattr(obj, part, _MISSING) if isinstance(obj, types.ModuleType) else \
            getattr(type(obj), part, _MISSING) if not isinstance(obj, type) else getattr(obj, part, _MISSING)
        if nxt is _MISSING and isinstance(obj, types.ModuleType):
            prefix = ".".join([root, *rest[:i + 1]])
            if prefix.startswith(TRITON_LANGUAGE + "."):
                try:
                    nxt = importlib.import_module(prefix)
                except ImportError:
                    nxt = _MISSING
            else:
                nxt = sys.modules.get(prefix, _MISSING)
        if nxt is _MISSING:
            return _MISSING
        obj = nxt
    return obj


def _allowed_module_name(name: str) -> bool:
    root = name.split(".")[0]
    if root == "triton":
        return name == "triton" or name == TRITON_LANGUAGE or name.startswith(TRITON_LANGUAGE + ".")
    return root in ALLOWED_MODULES and root != "__future__"


def _triton_problem(full: str) -> str | None:
    """Why a dotted name under triton is not the kernel-writing API, or None when it is."""
    parts = full.split(".")
    if parts[0] != "triton" or len(parts) == 1:
        return None
    if parts[1] not in TRITON_API:
        return (f"triton.{parts[1]} is not part of Triton's kernel-writing API (allowed: "
                f"{', '.join(f'triton.{n}' for n in sorted(TRITON_API))}, and triton.language's contents)")
    if parts[1] != "language":
        return None  # functions and classes: only dunders hang off them, which are refused anyway
    # triton.language...: every module on the way must be triton.language's own (or math), and every
    # other object must be defined in triton.language (tl.extra.pkgutil, tl.core.knobs, tl.core.wraps
    # and tl.extra.spec.loader lead elsewhere).
    obj = importlib.import_module(TRITON_LANGUAGE)
    for i, part in enumerate(parts[2:], start=2):
        prefix = ".".join(parts[:i + 1])
        if part in TRITON_FOREIGN_OK:
            return None
        nxt = getattr(obj, part, _MISSING)
        if nxt is _MISSING and isinstance(obj, types.ModuleType):
            try:
                nxt = importlib.import_module(prefix)
            except ImportError:
                return None  # not there: fails at run time, harmlessly
        if nxt is _MISSING:
            return None
        obj = nxt
        if isinstance(obj, types.ModuleType):
            if not _allowed_module_name(obj.__name__):
                return f"{prefix} is the module {obj.__name__}, which is not allowed"
            continue
        if isinstance(obj, _interpreter.InterpretedFunction):
            obj = obj.fn  # TRITON_INTERPRET=1 in this process wraps triton.language's own functions
        owner = getattr(obj, "__module__", None) if isinstance(obj, type) or callable(obj) \
            else type(obj).__module__
        if owner == "builtins" and not callable(obj) and not isinstance(obj, PLAIN_VALUES):
            # a container defined there is someone else's (tl.extra.modules is sys.modules)
            return f"{prefix} is a {type(obj).__name__}, not a number, string or Triton object"
        if not (owner == TRITON_LANGUAGE or (owner or "").startswith(TRITON_LANGUAGE + ".") or
                (owner == "builtins" and not callable(obj))):
            return f"{prefix} comes from {owner or 'outside triton.language'}, not from triton.language"
    return None


def _import_bindings(node: ast.Import | ast.ImportFrom):
    """(bound name, fully qualified object) for each name an import statement binds."""
    for a in node.names:
        if isinstance(node, ast.Import):
            yield (a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0])
        elif a.name != "*" and not node.level:
            yield a.asname or a.name, f"{node.module}.{a.name}"


def _all_aliases(tree: ast.Module) -> dict[str, str]:
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            aliases.update(_import_bindings(node))
    return aliases


def _resolve_with(aliases: dict[str, str], dotted: str) -> str:
    head, _, rest = dotted.partition(".")
    full = aliases.get(head)
    return dotted if full is None else (f"{full}.{rest}" if rest else full)


def _is_kernel(func: ast.AST, aliases: dict[str, str]) -> bool:
    """Decorated with triton.jit itself (not a function named jit), and only with Triton's decorators."""
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or not func.decorator_list:
        return False
    names = [_resolve_with(aliases, _dotted(d.func if isinstance(d, ast.Call) else d) or "?")
             for d in func.decorator_list]
    return "triton.jit" in names and all(n in KERNEL_DECORATORS for n in names)


IMMUTABLE_CALLS = frozenset({"float", "int", "str", "bool", "tuple", "frozenset", "range", "complex", "bytes",
                             "hasattr"})
# Triton calls whose result carries a live dict (a Config's .kwargs): as mutable as the dict.
HOLDER_CALLS = frozenset({"triton.Config"})


def _is_mutable_value(node: ast.AST | None, aliases: dict[str, str]) -> bool:
    """A container display, or a call that may return one (or a tensor): not float(...), tl.constexpr(...),
    triton.cdiv(...), math.sqrt(...)."""
    if isinstance(node, ast.Call):
        func = _dotted(node.func)
        full = _resolve_with(aliases, func) if func is not None and func.split(".")[0] in aliases else None
        if func is not None and (func in IMMUTABLE_CALLS or
                                 (full is not None and full.split(".")[0] in ("triton", "math") and
                                  full not in HOLDER_CALLS)):
            return False
        return True
    if isinstance(node, ast.Tuple):  # ([],) is as good a cache as []
        return any(_is_mutable_value(e, aliases) for e in node.elts)
    return isinstance(node, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp,
                             ast.GeneratorExp))


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed_torch: frozenset[str], forbidden_imports: frozenset[str]):
        self.allowed_torch = ALWAYS_ALLOWED_TORCH | allowed_torch
        self.forbidden_imports = forbidden_imports
        self.violations: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> fully qualified module or object
        self.in_kernel = False
        self.kernel_names: set[str] = set()  # set by _check_run: module-level jit functions
        self.wrapped_kernels: set[str] = set()  # set by _check_run: see _wrapped_kernels
        self.constants: set[str] = set()  # module-level names bound to literals
        self.mutable_globals: set[str] = set()  # module-level names bound to containers or call results
        self.protected: set[str] = set()  # names that may not be rebound: imports and MODULE_NAMES
        self.scope_locals: set[str] | None = None  # names bound in the function being visited
        self.fresh_locals: set[str] = set()  # host locals bound only to containers made in the call
        self.tainted_locals: set[str] = set()  # host locals that may hold an object kept between calls
        self.scope_params: set[str] = set()
        self.compiler_globals: set[str] = set()  # set by _check_run: see _compiler_globals
        self.in_kernel_signature = False  # visiting a kernel's defaults or annotations (globals allowed there)
        self.kernel_constexprs: set[str] = set()  # tl.constexpr parameters of the kernel being visited
        self.kernel_loop_names: set[str] = set()  # kernel names bound by for/with/walrus targets
        self.kernel_params: set[str] = set()
        self.metadata_locals: set[str] = set()  # host locals bound only to metadata (x.device, torch.finfo(...))
        self.source_lines: list[str] = []
        self.module_bound: set[str] = set()  # set by _check_run: names the module binds
        self.limits: set[str] = set()  # set by _check_run: module names bound to torch.finfo/iinfo(dtype)
        self.kernel_aliases: set[str] = set()  # host locals bound only to kernels (kernel = _k)
        self.own_locals: list[set[str]] = []  # per enclosing def, the names its own scope binds (_own_locals)
        self.dead_functions: set[str] = set()  # set by _check_run: see _dead_functions
        self.init_self: str | None = None  # in the body of a class's __init__: its instance parameter
        self.in_dead_function = False

    def _shadowed(self, name: str) -> bool:
        """Whether ``name`` is a local of the def being visited or of one enclosing it (a parameter named
        ``input``): there it is not the builtin, whose object only a caller naming it could pass in."""
        return any(name in scope for scope in self.own_locals)

    def flag(self, rule: str, node: ast.AST, message: str) -> None:
        if self.in_dead_function and rule == "torch-work":
            return  # a test helper nothing can call: its torch never runs (_dead_functions)
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), message))

    # -- imports -----------------------------------------------------------------------------------
    def _check_module(self, name: str, node: ast.AST) -> bool:
        root = name.split(".")[0]
        if root in self.forbidden_imports:
            self.flag("forbidden-import", node, f"importing {name!r} is not allowed: a solution may not use "
                                                "the task's baseline or reference, or d2k_env")
            return False
        if root not in ALLOWED_MODULES:
            self.flag("forbidden-import", node, f"importing {name!r} is not allowed; allowed modules: "
                                                f"{', '.join(sorted(ALLOWED_MODULES))}")
            return False
        problem = _triton_problem(name)
        if problem:
            self.flag("forbidden-import", node, f"importing {name!r} is not allowed: {problem}")
            return False
        return True

    def _check_bound_name(self, name: str | None, node: ast.AST, what: str) -> bool:
        """The checks an attribute name gets, for a name an import takes or binds."""
        if name is None:
            return True
        if _is_dunder(name):
            self.flag("forbidden-import", node, f"importing the dunder {what} {name!r} is not allowed")
        elif name in FORBIDDEN_ATTRIBUTES:
            self.flag("forbidden-import", node, f"importing {name!r} (frames, code objects, system modules) "
                                                "is not allowed")
        elif name in FORBIDDEN_BUILTINS:
            self.flag("forbidden-import", node, f"{name!r} is a forbidden builtin's name: it may not be imported "
                                                "or bound by an import")
        else:
            return True
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if self._check_bound_name(a.asname, node, "alias") and self._check_module(a.name, node):
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag("forbidden-import", node, "relative imports are not allowed")
            return
        if self._check_module(node.module or "", node):
            for a in node.names:
                if a.name == "*":
                    self.flag("forbidden-import", node, "star imports are not allowed")
                    continue
                full = f"{node.module}.{a.name}"
                if not (self._check_bound_name(a.name, node, "name") and
                        self._check_bound_name(a.asname, node, "alias")):
                    continue
                problem = _triton_problem(full)
                if problem:
                    self.flag("forbidden-import", node, f"importing {full!r} is not allowed: {problem}")
                    continue
                obj = _lookup(full)
                if isinstance(obj, types.ModuleType) and not _allowed_module_name(obj.__name__):
                    self.flag("forbidden-import", node, f"{full} is the module {obj.__name__}, which may not be "
                                                        "imported")
                    continue
                self.aliases[a.asname or a.name] = full
                self._check_torch_name(full, node)
                self._check_restricted(full, node)

    # -- torch use in host code ----------------------------------------------------------------------
    def _resolve(self, dotted: str) -> str:
        return _resolve_with(self.aliases, dotted)

    def _check_torch_name(self, full: str, node: ast.AST) -> None:
        if not (full == "torch" or full.startswith("torch.")):
            return
        if self.in_kernel:  # Triton cannot compile torch calls; only the CPU interpreter would run them
            self.flag("torch-work", node, f"{full} inside a @triton.jit kernel is not allowed")
            return
        rel = full[len("torch."):] if full != "torch" else ""
        if rel and rel not in self.allowed_torch and rel.split(".")[0] not in TORCH_ALLOWED_PREFIXES:
            self.flag("torch-work", node, f"torch.{rel} is not allowed in host code; the work must be done by "
                                          f"Triton kernels (allowed here: {', '.join(sorted(self.allowed_torch))})")

    def _check_restricted(self, full: str, node: ast.AST) -> None:
        root, _, rest = full.partition(".")
        allowed = RESTRICTED_MODULE_NAMES.get(root)
        if allowed is not None and rest.split(".")[0] not in allowed:
            self.flag("forbidden-import", node, f"{full} is not allowed; from {root} only "
                                                f"{', '.join(sorted(allowed))} may be used")

    def _check_triton_name(self, full: str, node: ast.AST) -> None:
        problem = _triton_problem(full)
        if problem:
            self.flag("triton-internals", node, problem)

    def _is_module(self, full: str) -> bool:
        """Whether a resolved name is a module object (torch, torch.cuda, tl, ...)."""
        root, *rest = full.split(".")
        if root not in ALLOWED_MODULES or root == "__future__":
            return False
        try:
            obj = importlib.import_module(root)
            for part in rest:
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            return False
        return isinstance(obj, types.ModuleType)

    def _is_metadata(self, node: ast.AST) -> bool:
        """Whether an expression is tensor metadata, never a tensor (x.device, x.dtype, torch.finfo(t))."""
        if isinstance(node, ast.Attribute) and node.attr in METADATA_ATTRIBUTES:
            return True
        if isinstance(node, ast.Call):
            func = _dotted(node.func)
            return func is not None and func.split(".")[0] in self.aliases and self._resolve(func) in METADATA_CALLS
        return isinstance(node, ast.Name) and (node.id in self.metadata_locals or (
            node.id in self.limits and node.id not in (self.scope_locals or set())))

    def _check_attribute_names(self, node: ast.Attribute) -> None:
        """[torch-work]/[introspection] on attribute names: dunders, frames, code objects, system modules
        and forbidden builtins' names, and private ones, anywhere; in host code the tensor methods and
        attributes that are not views or metadata, read or called, and the names that reach memory or
        files (x.numpy, x.tolist, x.untyped_storage, ...); in kernels .handle/.data/.base/.type and
        torch's tensor methods. For a Name/Attribute chain every attribute of it is checked (the chain is
        visited once: ``logging.getLogger.__globals__.get`` is refused at ``__globals__``, not passed at
        ``get``); beyond those names, a chain rooted at an imported module is covered by the module rules."""
        chain, n = [], node
        dotted = _dotted(node) is not None
        while isinstance(n, ast.Attribute):
            chain.append(n)
            n = n.value
            if not dotted:
                break
        module_rooted = dotted and isinstance(n, ast.Name) and n.id in self.aliases
        for a in chain:
            name = a.attr
            parent = getattr(a, "_d2k_parent", None)
            called = isinstance(parent, ast.Call) and parent.func is a
            if _is_dunder(name):
                self.flag("introspection", a, f"dunder attribute {name!r} is not allowed")
                continue
            if name in FORBIDDEN_ATTRIBUTES or name in FORBIDDEN_BUILTINS:
                self.flag("introspection", a, f"the attribute {name!r} (frames, code objects, system modules, a "
                                              "forbidden builtin's name) is not allowed")
                continue
            if name.startswith("_"):
                self.flag("introspection", a, f"the private attribute {name!r} is not allowed: private attributes "
                                              "reach torch's, Triton's and the interpreter's internals")
                continue
            if module_rooted:
                continue
            if self.in_kernel:
                if name in KERNEL_FORBIDDEN_ATTRIBUTES:
                    self.flag("torch-work", a, f"the attribute .{name} is not allowed in a @triton.jit kernel: under "
                                               "the interpreter it reaches numpy or torch objects, not Triton")
                elif not called and name in TENSOR_METHODS and name not in TRITON_METHODS | TRITON_INSTANCE_ATTRIBUTES:
                    self.flag("torch-work", a, f".{name} is torch's, not an attribute of Triton's tensors: a kernel "
                                               "body may use Triton's functions and tensor methods only")
                continue
            base = a.value
            kernel = isinstance(base, ast.Name) and (base.id in self.kernel_aliases or (
                base.id in self.kernel_names | self.wrapped_kernels and
                (self.scope_locals is None or base.id not in self.scope_locals)))
            if kernel and name != "best_config":
                self.flag("introspection", a, f"{base.id}.{name}: a kernel's attributes (hooks, its Python function, "
                                              "its cache) are not for host code; launch it as kernel[grid](...)")
                continue
            if name in HOST_FORBIDDEN_ATTRIBUTES and not (called and name in TENSOR_METHODS):
                self.flag("torch-work", a, f"the attribute .{name} is not allowed in host code: it gives host access "
                                           "to tensor memory (numpy arrays, lists, storages, files) or autograd "
                                           "state; do the work in a Triton kernel")
            elif not called and name in TENSOR_METHODS and \
                    name not in ALLOWED_TENSOR_METHODS | ALLOWED_TENSOR_ATTRIBUTES and not self._is_metadata(base):
                self.flag("torch-work", a, f"the tensor method or attribute .{name} is not allowed in host code, not "
                                           "even read without a call (only views, reshapes and shape, dtype and "
                                           "device queries are); do the work in a Triton kernel")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check_attribute_names(node)
        if node.attr in FORMAT_METHODS:
            problem = _format_string_problem(node.value)
            if problem:
                self.flag("format-string", node, problem)
        if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) and node.value.id == self.init_self:
            pass  # self.eps = eps in __init__: the instance being made (see visit_FunctionDef)
        elif isinstance(node.ctx, (ast.Store, ast.Del)):
            # Whatever the object (torch.Tensor passed through a parameter, a kernel, a module):
            # solutions never need to set attributes, and tampering always does.
            target = self._resolve(_dotted(node.value) or "?")
            self.flag("tampering", node, f"assigning or deleting attributes ({target}.{node.attr}) is not allowed")
        dotted = _dotted(node)
        if dotted is not None:
            root = dotted.split(".")[0]
            if root in FORBIDDEN_BUILTINS and root not in self.aliases and not self._shadowed(root):
                self.flag("introspection", node, f"the builtin {root!r} is not allowed")
            full = self._resolve(dotted)
            self._check_torch_name(full, node)
            self._check_restricted(full, node)
            if root in self.aliases:
                self._check_triton_name(full, node)
            if self.in_kernel:
                self._check_kernel_name(dotted.split(".")[0], node)
                if root in self.aliases:
                    self._check_kernel_math(full, node)
            return  # the chain's prefixes are not separate uses
        self.generic_visit(node)

    def _dunder_store(self, name: str, node: ast.AST) -> None:
        self.flag("module-dunder", node, f"{name!r} may not be bound, rebound or deleted: module dunders belong to "
                                         "the interpreter (a __name__ of '__main__' would run the "
                                         "if __name__ == '__main__': block, which runs at import unchecked)")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in self.protected:
            self._rebinding(node.id, node)
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _is_dunder(node.id) and node.id not in MODULE_DUNDERS_BOUND:
            self._dunder_store(node.id, node)
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.aliases and not self._shadowed(node.id):
            self.flag("introspection", node, f"the builtin {node.id!r} is not allowed")
        elif _is_dunder(node.id) and node.id not in MODULE_GLOBALS | MODULE_DUNDERS_BOUND:
            self.flag("introspection", node, f"{node.id!r} is not allowed")
        else:
            full = self._resolve(node.id)
            self._check_torch_name(full, node)
            self._check_restricted(full, node)
            if node.id in self.aliases:
                self._check_triton_name(full, node)
            # Reached only when the name is not the root of an attribute chain: a module passed,
            # stored or iterated would carry it past every rule above.
            if node.id in self.aliases and self._is_module(full):
                self.flag("introspection", node, f"the module {full} may only be used as {node.id}.<name>")
            if self.in_kernel and isinstance(node.ctx, ast.Load):
                self._check_kernel_name(node.id, node)
                if node.id in self.aliases:
                    self._check_kernel_math(full, node)

    def _rebinding(self, name: str, node: ast.AST) -> None:
        self.flag("module-rebinding", node, f"{name!r} names an imported module or object (or tl/triton/torch/"
                                            "math) and may not be rebound")

    def _check_kernel_name(self, name: str, node: ast.AST) -> None:
        allowed = self.scope_locals | self.kernel_names | self.constants | KERNEL_BUILTINS
        dotted = _dotted(node) or ""
        if name in self.limits - self.scope_locals and dotted.count(".") == 1 and \
                dotted.partition(".")[2] in LIMIT_ATTRIBUTES:
            # fp8_info.max: a number, fixed by a constant dtype (the finfo object itself is not readable)
            if not self.in_kernel_signature:
                self.flag("non-constexpr-global", node, f"the kernel reads the module-level number {dotted!r}: "
                                                        "Triton's GPU compiler refuses it (take it as a tl.constexpr "
                                                        "parameter's default, or bind it with tl.constexpr(...))")
            return
        if name not in allowed and self._resolve(name).split(".")[0] not in ("triton", "math"):
            self.flag("torch-work", node, f"a Triton kernel may read only its arguments, its locals, triton, math, "
                                          f"other kernels and module-level constants, not {name!r}")
        elif name in self.constants and name not in self.scope_locals | self.compiler_globals and \
                not self.in_kernel_signature:
            self.flag("non-constexpr-global", node, f"the kernel reads the module-level number {name!r}: Triton's "
                                                    f"GPU compiler refuses it (bind it as {name} = "
                                                    "tl.constexpr(...)); only the CPU interpreter would run it")

    def _check_state(self, target: ast.AST, node: ast.AST) -> None:
        """[hidden-state]: host code may change only a container the same call made (``out = []`` then
        ``out.append(v)``, ``d[k] = v``): never a parameter, an alias of a module object (``memo =
        CACHE.get(k)``), an item of a container (``box[0].append``) or an attribute (``cfg.kwargs[k] = v``).
        Anything else may outlive the call, and state between calls replays outputs."""
        if self.scope_locals is None or self.in_kernel:
            return
        if isinstance(target, ast.Name) and target.id in self.fresh_locals:
            return
        if self._module_cache(target):
            return  # what a module-level cache keeps is judged at run time (kept_state.py)
        what = target.id if isinstance(target, ast.Name) else (_dotted(target) or ast.unparse(target))[:60]
        self.flag("hidden-state", node, f"{what!r} is not a list, dict or set this call made: host code may "
                                        "change only containers it makes itself, not parameters, items, "
                                        "attributes or aliases of module objects (state between calls); a "
                                        "tensor is changed by a kernel")

    def _module_cache(self, target: ast.AST) -> bool:
        """Whether ``target`` is a module-level container named as such, or an item of one (``CACHE``,
        ``CACHE[key]``): never a parameter, an attribute, a kernel or a local alias (``memo =
        CACHE.get(k)``, ``book = CONFIG.kwargs``: an alias may reach into objects of other modules,
        which the run-time walk does not enter). The worker checks after every call that no such
        cache holds a tensor and that none changed on a call with shapes already seen: a cache keyed
        by shape passes, a replay or a counter does not."""
        root = target
        while isinstance(root, ast.Subscript):
            root = root.value
        return isinstance(root, ast.Name) and root.id in self.mutable_globals and \
            root.id not in self.scope_locals | self.kernel_names

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            fresh = isinstance(node.value, ast.Name) and node.value.id in self.fresh_locals
            if not self.in_kernel and self.scope_locals is not None and not fresh and _tensor_index(node.slice):
                self.flag("torch-work", node, f"{ast.unparse(node)[:60]!r}: writing into a tensor in host code is "
                                              "torch work; write it from a Triton kernel")
            else:
                self._check_state(node.value, node)
            if self.in_kernel:
                self.flag("torch-work", node, "item assignment inside a @triton.jit kernel is not allowed (Triton "
                                              "tensors have none; write results with tl.store)")
        self.generic_visit(node)

    def _literal_getattr(self, node: ast.Call) -> bool:
        """``getattr`` (the builtin, not rebound) with a string literal for the name, 2 or 3 arguments, or
        ``hasattr`` with 2."""
        return _literal_attribute_call(node, self.module_bound | set(self.aliases)) and \
            not self._shadowed(node.func.id)

    def _module_base(self, node: ast.AST) -> bool:
        """Whether an attribute's base is an imported module (tl.load, libdevice.exp, math.sqrt)."""
        base = _dotted(node)
        return base is not None and base.split(".")[0] in self.aliases and \
            self._resolve(base).split(".")[0] in ALLOWED_MODULES

    def _check_kernel_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if not self._module_base(func.value) and func.attr not in TRITON_METHODS:
                self.flag("torch-work", node, f".{func.attr}() is not a method of Triton's tensors: a kernel body "
                                              "may call Triton's functions and tensor methods only")
        elif isinstance(func, ast.Name):
            if func.id in self.scope_locals and func.id not in self.kernel_names:
                self.flag("torch-work", node, f"a kernel may not call its argument or local {func.id!r}: only "
                                              "Triton's functions, other kernels and a few builtins")
        else:
            self.flag("torch-work", node, "a kernel may call only Triton's functions, other kernels and a few "
                                          "builtins by name")
        for kw in node.keywords:
            if kw.arg == "out":
                self.flag("torch-work", node, "out= is not a Triton argument")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if self._literal_getattr(node):
            # getattr(obj, "name"[, default]) is obj.name with a fallback, hasattr(obj, "name") whether it
            # is there: checked as that attribute (the object, a module say, is not passed on).
            attribute = ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()),
                                          node)
            attribute._d2k_parent = node
            self.visit(attribute)
            for default in node.args[2:]:
                self.visit(default)
            return
        if isinstance(func, ast.Attribute) and self.scope_locals is not None and not self.in_kernel:
            root = func.value
            while isinstance(root, (ast.Subscript, ast.Attribute, ast.Call)):  # CACHE.get(k).append(v)
                root = root.func if isinstance(root, ast.Call) else root.value
            kept = isinstance(root, ast.Name) and (root.id in self.tainted_locals or (
                root.id in self.mutable_globals and root.id not in self.scope_locals))
            if kept and func.attr in KERNEL_OBJECT_API:
                self.flag("hidden-state", node, f"{root.id!r} may hold a kernel: host code may launch it "
                                                f"(kernel[grid](...)), not call .{func.attr}() on it")
            elif func.attr in MUTATING_METHODS:
                self._check_state(func.value, node)
        if self.in_kernel:
            self._check_kernel_call(node)
            if isinstance(func, ast.Name) and func.id in ("int", "float", "bool") and \
                    func.id not in self.aliases and func.id not in self.module_bound and \
                    not (len(node.args) == 1 and not node.keywords and self._kernel_constant(node.args[0])):
                self.flag("torch-work", node, f"{func.id}(...) inside a @triton.jit function may take only a "
                                              "literal, a tl.constexpr parameter or a module constant: on a "
                                              "Triton value it makes a Python number that Python then works on")
        elif isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS \
                and func.attr not in ALLOWED_TENSOR_METHODS:
            base = _dotted(func.value)
            base_root = self._resolve(base).split(".")[0] if base else None
            if base_root not in ALLOWED_MODULES or base.split(".")[0] not in self.aliases:
                self.flag("torch-work", node, f"the tensor method .{func.attr}() is not allowed in host code "
                                              "(only views, reshapes and shape queries are); do the work in a "
                                              "Triton kernel")
        self.generic_visit(node)

    def _python_work(self, node: ast.AST, what: str) -> None:
        if self.in_kernel:
            self.flag("torch-work", node, f"{what} inside a @triton.jit function is not allowed: under the "
                                          "interpreter it makes Python do the work; Triton cannot compile it")

    def visit_ListComp(self, node: ast.AST) -> None:
        self._python_work(node, "a comprehension")
        self.generic_visit(node)

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_List(self, node: ast.List) -> None:
        # Shapes (tl.zeros([BLOCK_M, BLOCK_N], ...)) are lists of constants; anything else is Python data.
        if self.in_kernel and not all(self._kernel_constant(e) or _is_shape_entry(e) for e in node.elts):
            self._python_work(node, "a list display of non-constant values")
        self.generic_visit(node)

    def visit_Set(self, node: ast.AST) -> None:
        self._python_work(node, "a set display")
        self.generic_visit(node)

    def visit_Dict(self, node: ast.AST) -> None:
        self._python_work(node, "a dict display")
        self.generic_visit(node)

    def _kernel_constant(self, node: ast.AST) -> bool:
        """A literal, a tl.constexpr parameter of the kernel being visited, a module constant, or an
        arithmetic of those (what int()/float()/bool() and list displays may take in a kernel)."""
        return _is_constant_expr(node, self.constants | self.kernel_constexprs, self.all_aliases,
                                 self.module_bound, self.limits - self.scope_locals) and not any(
            isinstance(n, ast.Call) for n in ast.walk(node))

    def _check_kernel_math(self, full: str, node: ast.AST) -> None:
        """Python's math module inside a kernel: its numbers may be read, its functions not (they work on
        Python numbers, never on Triton values; Triton's own tl.math is another module)."""
        if self.in_kernel and full.startswith("math.") and not isinstance(_lookup(full), (int, float)):
            self.flag("torch-work", node, f"{full} inside a @triton.jit function is not allowed: Python's math "
                                          "works on Python numbers, not Triton values (use tl.math / tl.*)")

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not self.in_kernel and self.scope_locals is not None and isinstance(node.target, ast.Name) and \
                (node.target.id in self.tainted_locals | self.scope_params):
            self.flag("hidden-state", node, f"{ast.unparse(node)[:60]!r}: on a parameter, or a name that may "
                                            "hold a module object, an in-place operator may change a list kept "
                                            f"between calls; write {node.target.id} = {node.target.id} <op> ...")
        if self.in_kernel and isinstance(node.target, ast.Name) and \
                (node.target.id in self.kernel_constexprs or node.target.id in self.kernel_loop_names):
            self.flag("torch-work", node, f"in-place update of {node.target.id!r} (a constexpr, or bound by a "
                                          "for/with/:= target) inside a kernel is not allowed")
        self.generic_visit(node)

    # -- structure -----------------------------------------------------------------------------------
    def visit_Try(self, node: ast.AST) -> None:
        # An import fallback at module level never gets here: each of its branches is checked instead
        # (_executions). Every other try would let a failing kernel fall back to other work.
        self.flag("try-except", node, "try/except is not allowed (a failing kernel must fail, not fall back), "
                                      "but for an import fallback at module level: try: <imports> except "
                                      "ImportError: <imports, literals or imported names bound to the same names>")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        problem = self._record_class_problem(node)
        if problem:
            self.flag("class-definition", node, f"only records may be defined (a @dataclass, or a typing.NamedTuple "
                                                f"subclass, of fields and plain methods): {problem}; a dunder "
                                                "method (__getattr__, __bool__, __del__, ...) would run host code "
                                                "where the harness does not look")
        if node.name in self.protected:
            self._rebinding(node.name, node)
        self.generic_visit(node)

    def _record_class_problem(self, node: ast.ClassDef) -> str | None:
        """Why a class is not a plain record or op, or None: undecorated with no bases at module level (an op
        class; one made inside a function could stand in for a tensor), decorated only with
        dataclasses.dataclass (then no bases), or a typing.NamedTuple subclass (then no decorators); no
        keywords (a metaclass); a body of a docstring, fields and methods, no dunders among them but
        ``__init__`` (which may set its instance's attributes) and ``__call__``: code that runs only
        where the file calls the class or an instance, never inside a truth test, a lookup or a launch."""
        decorators = [_resolve_with(self.aliases, _dotted(d.func if isinstance(d, ast.Call) else d) or "?")
                      for d in node.decorator_list]
        bases = [_resolve_with(self.aliases, _dotted(b) or "?") for b in node.bases]
        if node.keywords:
            return "no class keywords (metaclass=...)"
        plain_op = not decorators and not bases and isinstance(getattr(node, "_d2k_parent", None), ast.Module)
        if not ((decorators and set(decorators) == {"dataclasses.dataclass"} and not bases) or
                (not decorators and bases == ["typing.NamedTuple"]) or plain_op):
            return f"decorators {decorators or 'none'} and bases {bases or 'none'}"
        for stmt in node.body:
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)] if isinstance(stmt, ast.Assign) else \
                [stmt.target.id] if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) else \
                [stmt.name] if isinstance(stmt, ast.FunctionDef) else []
            docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            if not (docstring or isinstance(stmt, ast.Pass) or names) or any(
                    _is_dunder(n) and not (n in CLASS_DUNDERS and isinstance(stmt, ast.FunctionDef)) for n in names):
                return f"line {stmt.lineno} is not a field or a plain method"
            if isinstance(stmt, ast.Assign) and len(names) != len(stmt.targets):
                return f"line {stmt.lineno} assigns to something other than a name"
        return None

    def _check_args(self, args: ast.arguments) -> None:
        for p in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            if p.arg in self.protected:
                self._rebinding(p.arg, p)
            elif _is_dunder(p.arg):
                self.flag("introspection", p, f"the parameter name {p.arg!r} is not allowed")
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            if _is_mutable_value(default, self.all_aliases):  # a module-level name: judged at run time
                self.flag("hidden-state", default, "a mutable default argument (a list, dict, set, object or call "
                                                   "result) keeps state between calls; use None or a constant")

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._check_args(node.args)
        outer_init, self.init_self = self.init_self, None
        outer_locals = self.scope_locals
        saved = self.fresh_locals, self.tainted_locals, self.scope_params, self.kernel_aliases
        self.scope_locals = (outer_locals or set()) | _bound_names(node)
        self._enter_host_scope(node, inherit=True)
        self.generic_visit(node)
        self.scope_locals, self.init_self = outer_locals, outer_init
        self.fresh_locals, self.tainted_locals, self.scope_params, self.kernel_aliases = saved

    def _enter_host_scope(self, func: ast.AST, inherit: bool = False) -> None:
        """The fresh and tainted locals of a host function (see _host_scope); a lambda keeps its
        enclosing function's, less the names its parameters shadow."""
        params = _param_names(func.args)
        kept = (self.mutable_globals | self.kernel_names) - self.scope_locals
        fresh, tainted = _host_scope(func, kept | (self.tainted_locals - params if inherit else set()),
                                     self.module_bound | self.scope_locals)
        # A kernel alias of an enclosing function stays one where this scope does not rebind it.
        aliases = (set() if isinstance(func, ast.Lambda) else
                   _kernel_aliases(func, self.kernel_names | self.wrapped_kernels)) | \
            (self.kernel_aliases - _bound_names(func))
        if inherit:
            fresh |= self.fresh_locals - params
            tainted |= self.tainted_locals - params
            params |= self.scope_params
        self.fresh_locals, self.tainted_locals, self.scope_params = fresh, tainted, params
        self.kernel_aliases = aliases

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        if node.name in self.protected:
            self._rebinding(node.name, node)
        if _is_dunder(node.name) and not isinstance(getattr(node, "_d2k_parent", None), ast.ClassDef):
            self._dunder_store(node.name, node)  # methods: [class-definition] refuses their class
        self._check_args(node.args)
        kernel = _is_kernel(node, self.all_aliases)
        outer, self.in_kernel = self.in_kernel, self.in_kernel or kernel
        outer_dead, outer_init = self.in_dead_function, self.init_self
        self.in_dead_function |= node.name in self.dead_functions and \
            isinstance(getattr(node, "_d2k_parent", None), ast.Module)
        self.init_self = _init_instance(node)
        outer_locals, self.scope_locals = self.scope_locals, _bound_names(node)
        saved = (self.kernel_constexprs, self.kernel_loop_names, self.metadata_locals, self.fresh_locals,
                 self.tainted_locals, self.scope_params, self.kernel_aliases)
        self.metadata_locals = self._metadata_locals(node)
        self._enter_host_scope(node)
        if kernel:
            self._check_kernel_source(node)
            if outer_locals is not None:
                self.flag("kernel-source", node, f"@triton.jit function {node.name!r} is defined inside a function: "
                                                 "define kernels at module level, where their source is compared "
                                                 "with the checked text when the solution loads")
            a = node.args
            self.kernel_constexprs = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs
                                      if p.annotation is not None and
                                      self._resolve(_dotted(p.annotation) or "").endswith("constexpr")}
            self.kernel_loop_names = _loop_bound_names(node)
        self.own_locals.append(_own_locals(node))
        for child in node.body:
            self.visit(child)
        self.own_locals.pop()  # defaults and annotations are evaluated in the enclosing scope
        self.in_kernel_signature = True
        for default in node.args.defaults + node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        for p in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            if p.annotation is not None:
                self.visit(p.annotation)
        self.in_kernel_signature = False
        self.in_kernel, self.scope_locals, self.in_dead_function = outer, outer_locals, outer_dead
        self.init_self = outer_init
        (self.kernel_constexprs, self.kernel_loop_names, self.metadata_locals, self.fresh_locals,
         self.tainted_locals, self.scope_params, self.kernel_aliases) = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def _metadata_locals(self, func: ast.AST) -> set[str]:
        """Names every assignment in the function binds to metadata (dev = x.device; fi = torch.finfo(dt))."""
        meta, other = set(), set()
        for n in ast.walk(func):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                parent = getattr(n, "_d2k_parent", None)
                if isinstance(parent, ast.Assign) and n in parent.targets and self._is_metadata(parent.value):
                    meta.add(n.id)
                else:
                    other.add(n.id)
        return meta - other

    def _check_kernel_source(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """[kernel-source]: Triton's interpreter re-reads a kernel's source (inspect.getsourcelines) and starts
        the function at the LAST line whose stripped text begins with "def ": such a line inside a docstring,
        a string or a nested def would become the code that runs. Only the real def line may read so."""
        first = min([node.lineno] + [d.lineno - 1 for d in node.decorator_list])  # the '@' line
        def_line = self.source_lines[node.lineno - 1] if node.lineno <= len(self.source_lines) else ""
        if not def_line.strip().startswith("def "):
            self.flag("kernel-source", node, f"the def line of @triton.jit function {node.name!r} must read "
                                             "'def name(...)' (Triton's interpreter finds kernels by it)")
        for lineno in range(first, (node.end_lineno or node.lineno) + 1):
            text = self.source_lines[lineno - 1].strip() if lineno <= len(self.source_lines) else ""
            if lineno != node.lineno and _DEF_LINE.match(text):
                self.flag("kernel-source", _Line(lineno), f"line {lineno} of @triton.jit function {node.name!r} "
                          "begins with 'def' (in a docstring, a string or a nested def): Triton's interpreter would "
                          "run the function from that line, not from the real def; reword or re-indent it")

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name in self.protected:
            self._rebinding(node.name, node)
        if node.name and _is_dunder(node.name):
            self._dunder_store(node.name, node)  # except ... as __name__
        self.generic_visit(node)

    def visit_Match(self, node: ast.AST) -> None:
        # Capture patterns (case name:, case [a, *rest]:, case {**rest}:, ... as name) bind names that
        # the rebinding and bound-name analyses, which follow ast.Name stores, would not see.
        self.flag("module-rebinding", node, "match statements are not allowed: they are not needed in kernels "
                                            "or launchers, and their capture patterns rebind names")

    def visit_Global(self, node: ast.Global) -> None:
        self.flag("introspection", node, "global statements are not allowed")

    visit_Nonlocal = visit_Global


_DEF_LINE = re.compile(r"(async\s+)?def(\s|\\|$)")

# str methods that read a format string: its fields walk attributes ("{0.__class__}") and items ("{0[k]}")
# of their arguments with getattr/getitem, which no attribute rule sees.
FORMAT_METHODS = frozenset({"format", "format_map"})


def _format_fields(template: str):
    """The field names of a format string, nested ones in format specs included (ValueError when malformed)."""
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is not None:
            yield field
        if spec:
            yield from _format_fields(spec)


def _format_string_problem(receiver: ast.AST) -> str | None:
    """Why ``receiver.format(...)`` / ``.format_map(...)`` may walk attributes or items, or None."""
    if not (isinstance(receiver, ast.Constant) and isinstance(receiver.value, str)):
        return (".format/.format_map may only be called on a string literal: a format string built at run time "
                "can name attributes ('{0.__class__}') that str.format reads with getattr, past the attribute rules")
    try:
        fields = list(_format_fields(receiver.value))
    except ValueError as exc:
        return f"the format string {receiver.value[:40]!r} is malformed ({exc})"
    for field in fields:
        if "." in field or "[" in field:
            return (f"the format field {{{field[:40]}}} reads an attribute or an item of its argument (str.format "
                    "walks it with getattr/getitem, past the attribute rules); format plain values: "
                    "'{}'.format(x.shape[0])")
    return None


@dataclass(frozen=True)
class _Line:
    """A node stand-in for a violation at a source line."""
    lineno: int


def _tensor_index(node: ast.AST) -> bool:
    """An index only tensors take in practice: slices, ``...`` or a mask (``t[:] = v``, ``t[t == x] = v``)."""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(isinstance(p, (ast.Slice, ast.Compare)) or (isinstance(p, ast.Constant) and p.value is Ellipsis)
               for p in parts)


def _is_shape_entry(node: ast.AST) -> bool:
    """x.shape[i] (a constexpr in Triton): a list display of those is a shape, not Python data."""
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
        node.value.attr == "shape" and isinstance(node.slice, ast.Constant)


def _loop_bound_names(func: ast.AST) -> set[str]:
    """Names bound by for/with/walrus/comprehension targets in a function (not by plain assignment, which
    the interpreter converts to a Triton tensor)."""
    names = set()
    for node in ast.walk(func):
        targets = []
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        elif isinstance(node, ast.NamedExpr):
            targets = [node.target]
        for t in targets:
            names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _param_names(a: ast.arguments) -> set[str]:
    return {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]}


# Dunder methods a class of the file may define: run only where the file calls the class or an instance.
CLASS_DUNDERS = frozenset({"__init__", "__call__"})


def _init_instance(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The instance parameter of a class's ``__init__`` (a def named so directly in a class body), when
    nothing in it rebinds that name: there ``self.eps = eps`` sets an attribute of the instance being
    made (``__init__`` is reached only by calling the class: ``C.__init__`` is a dunder attribute)."""
    params = func.args.posonlyargs + func.args.args
    if func.name != "__init__" or not isinstance(getattr(func, "_d2k_parent", None), ast.ClassDef) or not params:
        return None
    name = params[0].arg
    rebound = any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(func))
    return None if rebound or name in _param_names(func.args) - {name} else name


def _own_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a def's own scope binds: its parameters, and the names its body stores, imports or
    defines, not those of nested defs, lambdas, classes or comprehensions (fewer than Python's own
    locals where a walrus hides in those: a name left out is only checked as the builtin)."""
    names = _param_names(func.args)
    stack = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {name for name, _ in _import_bindings(node)}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _bound_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters and every name the function (or a nested scope in it) binds."""
    names = _param_names(func.args)
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not func:
            names |= {p.arg for p in node.args.args + node.args.kwonlyargs}
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
    return names


# Calls whose result is a plain number, string or bool, whatever they are given: binding one does not
# carry the object it was computed from.
SCALAR_CALLS = frozenset({"len", "int", "float", "bool", "str", "isinstance", "hasattr", "callable", "repr",
                          "abs", "round"})
FRESH_CALLS = frozenset({"list", "dict", "set"})  # new containers, when the builtin is not rebound


def _bindings(func: ast.AST):
    """(target, expression it is bound from) for each binding in a function: assignments, walrus,
    for/comprehension/with targets, and parameters with their defaults."""
    a = func.args
    positional = a.posonlyargs + a.args
    for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        yield ast.Name(id=p.arg, ctx=ast.Store()), d
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            yield ast.Name(id=p.arg, ctx=ast.Store()), d
    for n in ast.walk(func):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                yield t, n.value
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None:
            yield n.target, n.value
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            yield n.target, n.iter
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            yield n.optional_vars, n.context_expr


def _stored_names(target: ast.AST) -> set[str]:
    """The names a binding target rebinds (not those read inside it, as d in d[k] = v)."""
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _mentions(expr: ast.AST, names: set[str], rebound: set[str]) -> bool:
    """Whether an expression may evaluate to (or contain) the object one of ``names`` holds: it names
    one outside a comparison and outside the SCALAR_CALLS."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Compare) or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and
                                          n.func.id in SCALAR_CALLS and n.func.id not in rebound):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names:
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _host_scope(func: ast.AST, kept: set[str], rebound: set[str]) -> tuple[set[str], set[str]]:
    """(fresh, tainted) locals of a host function. ``kept`` are the non-local names whose objects outlive a
    call (module containers, kernels). Tainted: bound, directly or through other locals, from an expression
    that may hold such an object (``memo = CACHE.get(k)``, ``k = kernel``, ``for c in TABLE``). Fresh: never
    a parameter, bound only to a container made on the spot (``[]``, ``{}``, ``dict(...)``, a comprehension)."""
    pairs = list(_bindings(func))
    tainted: set[str] = set()
    while True:
        grown = {n for t, v in pairs if _mentions(v, kept | tainted, rebound) for n in _stored_names(t)} - tainted
        if not grown:
            break
        tainted |= grown

    def fresh_value(v: ast.AST) -> bool:
        return isinstance(v, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in FRESH_CALLS and
            v.func.id not in rebound)

    fresh, stale = set(), _param_names(func.args)
    for t, v in pairs:
        names = _stored_names(t)
        (fresh if isinstance(t, ast.Name) and fresh_value(v) else stale).update(names)
    return fresh - stale, tainted


def _module_bound(table: symtable.SymbolTable) -> set[str]:
    """Names the module binds (so a builtin of that name is not the builtin)."""
    return {sym.get_name() for sym in table.get_symbols() if sym.is_assigned() or sym.is_imported() or
            sym.is_namespace()}


def _resolved_object(full: str):
    """The object a resolved dotted name of torch, triton or math names; _MISSING when unknown."""
    if full.split(".")[0] != "torch":
        return _lookup(full)
    obj = torch
    for part in full.split(".")[1:]:
        if _is_dunder(part):
            return _MISSING
        try:
            obj = getattr(obj, part)
        except Exception:
            return _MISSING
    return obj


_CONSTANT_FUNCTIONS = frozenset({"triton.language.constexpr", "triton.language.core.constexpr", "triton.cdiv",
                                 "triton.next_power_of_2"})


# The numbers torch.finfo and torch.iinfo give: what a dtype's limits may be read as.
LIMIT_ATTRIBUTES = frozenset({"max", "min", "eps", "tiny", "bits", "resolution", "smallest_normal"})
LIMIT_CALLS = frozenset({"torch.finfo", "torch.iinfo"})


def _is_constant_expr(node: ast.AST | None, constants: set[str], aliases: dict[str, str], bound: set[str],
                      limits: set[str] = frozenset()) -> bool:
    """A module constant: literals, arithmetic/boolean/comparison operators and tuples of constants, other
    module constants, math's numbers and functions, builtin conversions (float('inf')), tl.constexpr(...),
    triton.cdiv/next_power_of_2 of constants, dtypes (tl.float32, torch.bfloat16) and the limits of one
    (torch.finfo(torch.float8_e4m3fn).max, or fp8_info.max where ``limits`` holds fp8_info, a module name
    bound once to torch.finfo of a constant dtype: only its numbers, never the finfo object)."""
    def const(n) -> bool:
        if isinstance(n, ast.Constant):
            return True
        if isinstance(n, ast.UnaryOp):
            return const(n.operand)
        if isinstance(n, ast.BinOp):
            return const(n.left) and const(n.right)
        if isinstance(n, ast.BoolOp):
            return all(const(v) for v in n.values)
        if isinstance(n, ast.Compare):
            return const(n.left) and all(const(c) for c in n.comparators)
        if isinstance(n, ast.IfExp):
            return const(n.test) and const(n.body) and const(n.orelse)
        if isinstance(n, ast.Tuple):
            return all(const(e) for e in n.elts)
        if isinstance(n, ast.Subscript):
            return const(n.value) and const(n.slice)
        if isinstance(n, ast.Slice):
            return all(p is None or const(p) for p in (n.lower, n.upper, n.step))
        if isinstance(n, ast.Name):
            return n.id in constants
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Call):  # torch.finfo(torch.float8_e4m3fn).max
            return _is_limits_call(n.value, const, aliases) and n.attr in LIMIT_ATTRIBUTES
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in limits:
            return n.attr in LIMIT_ATTRIBUTES  # fp8_info.max
        if isinstance(n, ast.Attribute):
            dotted = _dotted(n)
            if dotted is None or dotted.split(".")[0] not in aliases:
                return False
            full = _resolve_with(aliases, dotted)
            obj = _resolved_object(full)
            if full.startswith("math."):
                return isinstance(obj, (int, float))
            return isinstance(obj, (torch.dtype, _tl.dtype))
        if isinstance(n, ast.Call):
            if n.keywords or any(isinstance(a, ast.Starred) or not const(a) for a in n.args):
                return False
            if isinstance(n.func, ast.Name) and n.func.id not in aliases:
                return n.func.id in CONSTANT_BUILTINS and n.func.id not in bound
            dotted = _dotted(n.func)
            if dotted is None or dotted.split(".")[0] not in aliases:
                return False
            full = _resolve_with(aliases, dotted)
            return full in _CONSTANT_FUNCTIONS or (full.startswith("math.") and callable(_lookup(full)))
        return False

    try:
        return node is not None and const(node)
    except RecursionError:
        return False


def _is_limits_call(call: ast.Call, const, aliases: dict[str, str]) -> bool:
    """torch.finfo(<constant>) or torch.iinfo(<constant>): the limits of one fixed dtype."""
    func = _dotted(call.func)
    return func is not None and func.split(".")[0] in aliases and _resolve_with(aliases, func) in LIMIT_CALLS and \
        not call.keywords and len(call.args) == 1 and const(call.args[0])


def _module_stores(tree: ast.Module) -> dict[str, int]:
    """How many times module-level code binds or deletes each name (defs, classes, imports, stores)."""
    stores: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores[node.name] = stores.get(node.name, 0) + 1
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                stores[sub.id] = stores.get(sub.id, 0) + 1
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                for name, _ in _import_bindings(sub):
                    stores[name] = stores.get(name, 0) + 1
    return stores


def _module_constants(tree: ast.Module, aliases: dict[str, str], bound: set[str]) -> tuple[set[str], set[str]]:
    """(constants, limits): module-level names bound once, to a constant expression (see
    _is_constant_expr), and those bound once to torch.finfo/iinfo of a constant dtype (``fp8_info =
    torch.finfo(torch.float8_e4m3fn)``), whose numbers (fp8_info.max) are constants."""
    stores = _module_stores(tree)
    names: set[str] = set()
    limits: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                continue
            once = {t.id for t in targets if stores.get(t.id) == 1}
            if _is_constant_expr(node.value, names, aliases, bound, limits):
                names |= once
            elif isinstance(node.value, ast.Call) and _is_limits_call(
                    node.value, lambda n: _is_constant_expr(n, names, aliases, bound, limits), aliases):
                limits |= once
    return names, limits


def _compiler_globals(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    """Module-level names Triton's GPU compiler lets a kernel read: bound to ``tl.constexpr(...)`` or to
    an object of triton.language (a dtype, a function). A plain number it refuses ("Cannot access
    global variable"), though the interpreter runs it."""
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if targets and all(isinstance(t, ast.Name) for t in targets):
            value = node.value.func if isinstance(node.value, ast.Call) else node.value
            dotted = _dotted(value)
            full = _resolve_with(aliases, dotted) if dotted and dotted.split(".")[0] in aliases else ""
            # arithmetic on a constexpr (1.0 / FP8_MAX) makes a constexpr
            arithmetic = isinstance(node.value, (ast.BinOp, ast.UnaryOp)) and any(
                isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.value))
            if arithmetic or (full.startswith(TRITON_LANGUAGE + ".") and (
                    value is node.value or full.rsplit(".", 1)[-1] == "constexpr")):
                names |= {t.id for t in targets}
    return names


def _is_main_guard(node: ast.AST) -> bool:
    """if __name__ == "__main__": (never true in the worker, which loads the solution under the name
    ``solution``, and [module-dunder] refuses every binding of ``__name__``)."""
    t = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and \
        t.left.id == "__name__" and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) and \
        isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__"


# Calls whose lambda arguments run at launch time, not at import (host code guarded at run time).
_LAUNCH_TIME_CALLS = frozenset({"triton.autotune", "triton.heuristics", "triton.Config", "triton.jit"})


def _module_level_calls(tree: ast.Module, aliases: dict[str, str], bound: set[str]) -> list[Violation]:
    """[hidden-state]: code that runs at import (module-level statements, decorators, annotations, and
    lambdas passed to calls there) may call only pure functions that make numbers, containers and launch
    configurations: a tensor or object made at import (torch.empty at module level, a helper's result)
    would keep state between calls, and a kernel could update it on the device."""
    out: list[Violation] = []
    # The file's own functions and classes: their bodies are host code under every rule here, and
    # what they leave in the module is checked at run time (kept_state.py): a helper building the
    # autotune configs, a frozen dataclass instance of defaults.
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    wrapped = _wrapped_kernels(tree, aliases)
    wrapper_calls = {id(stmt.value.func) for stmt in tree.body if isinstance(stmt, ast.Assign) and
                     len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in wrapped}

    def allowed(func: ast.AST) -> str | None:
        """None when the call may run at import, else the callee's name."""
        if isinstance(func, ast.Name) and func.id not in aliases:
            if func.id in own:
                return None
            return None if func.id in MODULE_LEVEL_BUILTINS and func.id not in bound else func.id
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant):
            return None  # ", ".join(...), "{}".format(...)
        if isinstance(func, ast.Call) and id(func) in wrapper_calls:
            return None  # triton.autotune(...)(kernel): a decorator applied by a call (_wrapped_kernels)
        dotted = _dotted(func)
        if dotted is None:
            return "an expression"
        if dotted.split(".")[0] not in aliases:
            return dotted
        full = _resolve_with(aliases, dotted)
        if full in MODULE_LEVEL_CALLS or full in _CONSTANT_FUNCTIONS or full.startswith("torch.version.") or \
                full.split(".")[0] in ("math", "itertools") or full.startswith(TRITON_LANGUAGE + "."):
            return None
        return full

    def scan(node: ast.AST, call_arg: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                scan(d, False)
            a = node.args
            for p in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                if p.annotation is not None:
                    scan(p.annotation, False)
            if node.returns is not None:
                scan(node.returns, False)
            return  # defaults: [hidden-state] for mutable defaults covers calls there
        if isinstance(node, ast.Lambda):
            if call_arg:  # map(lambda ...), sorted(key=lambda ...): runs now
                scan(node.body, True)
            return
        if isinstance(node, ast.Call):
            callee = allowed(node.func)
            if callee is not None:
                out.append(Violation("hidden-state", node.lineno,
                                     f"{callee}(...) runs at import: module-level code may call only pure helpers "
                                     "(builtins, math, itertools, functools.partial, triton's decorators, Config, "
                                     "cdiv and tl.constexpr, torch.finfo/iinfo/device); a tensor or object made "
                                     "at import keeps state between calls: make it inside forward"))
            scan(node.func, call_arg)
            dotted = _dotted(node.func)
            launch_time = dotted is not None and dotted.split(".")[0] in aliases and \
                _resolve_with(aliases, dotted) in _LAUNCH_TIME_CALLS
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                scan(arg, not launch_time)
            return
        for child in ast.iter_child_nodes(node):
            scan(child, call_arg)

    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if _is_main_guard(stmt):
            for child in stmt.orelse:
                scan(child, False)
            continue
        scan(stmt, False)
    return out


ITERATOR_BUILTINS = frozenset({"iter", "map", "filter", "zip", "enumerate", "reversed"})
# Calls that read an iterator to the end and keep none of it (an iterator handed to anything else,
# functools.reduce's initial value say, may come back alive).
ITERATOR_CONSUMERS = frozenset({"tuple", "list", "set", "frozenset", "dict", "sorted", "sum", "min", "max", "any",
                                "all", "len"})


# itertools functions whose results hold live iterators (tee's tuple of them, groupby's groups): reading
# them to the end keeps those.
ITERATORS_OF_ITERATORS = frozenset({"itertools.tee", "itertools.groupby"})


def _module_level_state(tree: ast.Module, aliases: dict[str, str], mutables: set[str],
                        bound: set[str] = frozenset()) -> list[Violation]:
    """[hidden-state] made at import without a tensor: an iterator kept past the statement that makes
    it (``itertools.count()`` advances each time it is read; only iteration and the calls in
    ITERATOR_CONSUMERS use one up), and containers bound into a functools.partial
    (``partial(helper, [])``: the same list on every call). Everything that runs at import is scanned:
    the else branch of ``if __name__ == "__main__":`` (only its body never runs), and the bodies of
    lambdas (``map(lambda r: iter(r), ...)`` runs now). Iterators made where the syntax shows no call
    count too: an iterator-making function passed as a value (``map(iter, ...)``, ``f = iter``), and
    tee/groupby, whose items are iterators however they are read."""
    out: list[Violation] = []

    def callee(node: ast.Call) -> str:
        return _resolve_with(aliases, _dotted(node.func) or "?")

    def maker(node: ast.AST) -> str | None:
        """The iterator-making function a Name/Attribute names (iter, map, itertools.count, ...), or None."""
        dotted = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if dotted is None:
            return None
        if dotted.split(".")[0] in aliases:
            full = _resolve_with(aliases, dotted)
            return full if full.startswith("itertools.") else None
        return dotted if dotted in ITERATOR_BUILTINS and dotted not in bound else None

    def is_iterator(node: ast.AST) -> bool:
        if isinstance(node, ast.GeneratorExp):
            return True
        if not isinstance(node, ast.Call):
            return False
        name = callee(node)
        return name.startswith("itertools.") or (name in ITERATOR_BUILTINS and name not in aliases)

    def visit(node: ast.AST, parent: ast.AST | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # their bodies run later, under the function rules
        if isinstance(node, ast.Call) and callee(node) == "functools.partial":
            for arg in [*node.args[1:], *(k.value for k in node.keywords)]:
                if _is_mutable_value(arg, aliases) or (isinstance(arg, ast.Name) and arg.id in mutables):
                    out.append(Violation("hidden-state", arg.lineno, "functools.partial binds a container or an "
                                         "object made at import: every call would share it (state between calls)"))
        consumed = (isinstance(parent, (ast.comprehension, ast.For)) and parent.iter is node) or \
            (isinstance(parent, ast.Call) and node in parent.args and
             (callee(parent) in ITERATOR_CONSUMERS or is_iterator(parent) or
              (isinstance(parent.func, ast.Attribute) and isinstance(parent.func.value, ast.Constant))))
        if isinstance(node, ast.Call) and callee(node) in ITERATORS_OF_ITERATORS:
            out.append(Violation("hidden-state", node.lineno, f"{callee(node)}(...) at module level makes "
                                 "iterators that outlive any reading of its result (state between calls)"))
        elif is_iterator(node) and not consumed:
            out.append(Violation("hidden-state", node.lineno, "an iterator kept at module level advances each "
                                 "time it is read (state between calls): consume it where it is made, e.g. "
                                 "tuple(...)"))
        elif (name := maker(node)) and not (isinstance(parent, ast.Call) and parent.func is node) and \
                not (isinstance(parent, ast.Attribute) and parent.value is node):
            out.append(Violation("hidden-state", node.lineno, f"{name} passed or bound as a value at module level "
                                 "makes iterators where no call shows it (map(iter, ...)): call it where its "
                                 "result is consumed"))
        for child in ast.iter_child_nodes(node):
            visit(child, node)

    for stmt in tree.body:
        if _is_main_guard(stmt):
            for child in stmt.orelse:  # runs at import whenever the body does not
                visit(child, None)
        else:
            visit(stmt, None)
    return out


# What Triton's GPU code generator has visitors and operator tables for, as fixed tables (triton_compat.py:
# Triton 3.6's language, which later releases accept too), not read off the installed Triton.
GPU_UNSUPPORTED_NODES = gpu_unsupported_nodes()
# Loop iterators the code generator accepts (``for`` over anything else: "Only `range` and `static_range`
# iterators are currently supported").
GPU_LOOP_ITERATORS = frozenset({"range", "triton.language.range", "triton.language.static_range",
                                "triton.language.core.range", "triton.language.core.static_range"})


def _gpu_compile_problems(tree: ast.Module, aliases: dict[str, str], bound: set[str]) -> list[Violation]:
    """[gpu-compile]: Python in a kernel body that Triton's GPU compiler (3.6's code generator) refuses
    whatever the values are, and the interpreter would run: statements and expressions it has no visitor
    for (break, continue, lambda, :=, del, raise, ...), chained comparisons, ``in``, ``@``, loops over
    anything but range/tl.range/tl.static_range, for-else and while-else (static_range's aside), a
    return inside a loop or a with block, a value returned from a kernel no other kernel names (a
    launched one), several assignment targets or starred ones, and a constant ``while`` test. What depends on values (an ``if`` on a block tensor, a float loop bound) is the
    interpreter's to refuse (interpreter_patch), and so are builtins the code generator does not know
    (``bool``, ``abs``): in a branch on a constexpr that the compiler never visits they are harmless, and
    the interpreter refuses them where they run (tests/test_gpu_validity.py)."""
    out: list[Violation] = []

    def refuse(node: ast.AST, message: str) -> None:
        out.append(Violation("gpu-compile", getattr(node, "lineno", 0), f"Triton's GPU compiler refuses this kernel "
                                                                        f"code ({message}); only the CPU interpreter "
                                                                        "would run it"))

    def iterator(node: ast.For) -> str | None:
        it = node.iter
        if not isinstance(it, ast.Call):
            return None
        dotted = _dotted(it.func)
        if dotted is None:
            return None
        if dotted == "range" and "range" not in bound:
            return "range"
        return _resolve_with(aliases, dotted) if dotted.split(".")[0] in aliases else None

    def walk(node: ast.AST, parent: ast.AST | None, loops: list[str], in_with: bool, local: set[str]) -> None:
        kind = type(node)
        if kind in GPU_UNSUPPORTED_NODES and not (kind is ast.Starred and isinstance(parent, ast.Call)) and \
                not (kind is ast.FormattedValue and isinstance(parent, ast.JoinedStr)):
            refuse(node, f"unsupported AST node type: {kind.__name__}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            refuse(node, "nested function definition is not supported")
            return
        elif isinstance(node, ast.Compare):
            if len(node.ops) > 1:
                refuse(node, "simultaneous multiple comparison is not supported")
            bad = [type(op).__name__ for op in node.ops if type(op) not in GPU_COMPARES]
            if bad:
                refuse(node, f"AST comparison operator '{bad[0]}' is not (currently) implemented")
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) not in GPU_BINOPS:
            refuse(node, f"AST binary operator '{type(node.op).__name__}' is not (currently) implemented")
        elif isinstance(node, ast.Assign) and (len(node.targets) > 1 or any(
                isinstance(n, ast.Starred) for t in node.targets for n in ast.walk(t))):
            refuse(node, "several or starred assignment targets")
        elif isinstance(node, ast.Return) and loops:
            refuse(node, "Cannot have `return` statements inside `while` or `for` statements in triton.")
        elif isinstance(node, ast.Return) and in_with:
            refuse(node, "Cannot have `return` statements inside `with` statements in triton")
        elif isinstance(node, (ast.If, ast.IfExp)) and isinstance(node.test, ast.Constant) and \
                type(node.test.value) not in (bool, int, type(None)):
            refuse(node, f"`if` conditionals can only accept values of type {{NoneType, bool, int}}, not objects of "
                         f"type {type(node.test.value).__name__}")
        elif isinstance(node, ast.While):
            if node.orelse:
                refuse(node, "while ... else")
            if isinstance(node.test, ast.Constant):
                refuse(node, "a constant `while` condition ('constexpr' object has no attribute 'handle'): the "
                             "condition must be a scalar boolean tensor")
        elif isinstance(node, ast.For):
            name = iterator(node)
            if name not in GPU_LOOP_ITERATORS:
                refuse(node, "Only `range` and `static_range` iterators are currently supported")
            elif not isinstance(node.target, ast.Name):
                refuse(node, "a loop target must be a single name")
            elif node.orelse and not name.endswith("static_range"):
                refuse(node, "Don't know what to do with else after for")
            static = name is not None and name.endswith("static_range")
            for child in ast.iter_child_nodes(node):
                in_body = child in node.body or child in node.orelse
                walk(child, node, loops + (["for"] if in_body and not static else []), in_with, local)
            return
        if isinstance(node, ast.While):
            walk(node.test, node, loops, in_with, local)
            for child in node.body + node.orelse:
                walk(child, node, loops + ["while"], in_with, local)
            return
        if isinstance(node, ast.With):
            for child in ast.iter_child_nodes(node):
                walk(child, node, loops, in_with or child in node.body, local)
            return
        for child in ast.iter_child_nodes(node):
            walk(child, node, loops, in_with, local)

    kernels = [func for func in ast.walk(tree) if _is_kernel(func, aliases)]
    # A kernel that other kernels name (call, or hand to tl.reduce as its combine function) is a
    # device function and may return a value; one that none names is launched, and the backend fails
    # on a launched kernel that returns a value ("PassManager::run failed" on the H200) though the
    # front end accepts it.
    helpers = {node.id for func in kernels for node in ast.walk(func) if isinstance(node, ast.Name)}
    for func in kernels:
        local = _bound_names(func)
        for stmt in func.body:
            walk(stmt, func, [], False, local)
        if func.name not in helpers:
            for node in ast.walk(func):
                if isinstance(node, ast.Return) and node.value is not None and not (
                        isinstance(node.value, ast.Constant) and node.value.value is None):
                    refuse(node, "a launched kernel returns no value: only a device function called from "
                                 "another kernel may")
    return out


KERNEL_WRAPPERS = frozenset({"triton.autotune", "triton.heuristics"})


def _wrapped_kernels(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    """Module-level names bound once at module level to ``triton.autotune(...)(k)`` or
    ``triton.heuristics(...)(k)`` where ``k`` is a kernel of the file or another such name: a kernel
    applied by a call rather than as a decorator, launched as one. Its body was checked as a kernel."""
    stores = _module_stores(tree)
    known = {n.name for n in tree.body if _is_kernel(n, aliases) and stores.get(n.name) == 1}
    wrapped: set[str] = set()
    for stmt in tree.body:
        value = getattr(stmt, "value", None)
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stores.get(stmt.targets[0].id) == 1 and isinstance(value, ast.Call) and not value.keywords
                and len(value.args) == 1 and isinstance(value.args[0], ast.Name) and value.args[0].id in known
                and isinstance(value.func, ast.Call)):
            continue
        dotted = _dotted(value.func.func)
        if dotted is not None and dotted.split(".")[0] in aliases and _resolve_with(aliases, dotted) in KERNEL_WRAPPERS:
            wrapped.add(stmt.targets[0].id)
            known.add(stmt.targets[0].id)
    return wrapped


def _decorators_only(tree: ast.Module, aliases: dict[str, str]) -> list[Violation]:
    """[kernel-source]: triton.jit, autotune and heuristics only in a def's decorator list, or autotune and
    heuristics applied by a call to a kernel of the file (_wrapped_kernels). Called on a function
    (``k = triton.jit(body)``) they make a kernel whose body the policy checked as host code."""
    in_decorators = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for d in node.decorator_list for sub in ast.walk(d)}
    wrapped = _wrapped_kernels(tree, aliases)
    in_decorators |= {id(sub) for stmt in tree.body if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
                      isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in wrapped
                      for sub in ast.walk(stmt.value.func)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in in_decorators:
            dotted = _dotted(node)
            if dotted is not None and dotted.split(".")[0] in aliases and \
                    _resolve_with(aliases, dotted) in KERNEL_DECORATORS:
                out.append(Violation("kernel-source", node.lineno, f"{dotted} may only decorate a def "
                                     "(@triton.jit): a kernel made by calling it has a body the policy cannot "
                                     "check as a kernel"))
    return out


def _module_mutables(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    """Module-level names bound to a container display or a call result (anything that may keep state)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and _is_mutable_value(node.value, aliases):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    # Only what is bound at module level (function bodies were not walked into above, but ast.walk
    # does visit them): keep names not bound as locals of some function only.
    module_level = set()
    for node in tree.body:
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                break
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                module_level.add(sub.id)
    return names & module_level


def _name_problems(tree: ast.Module, table: symtable.SymbolTable, aliases: dict[str, str]) -> list[Violation]:
    """[unbound-name]: global names loaded anywhere that nothing in the file binds, and module-level
    bindings of the names Triton's interpreter injects, other than the import of the very same object."""
    bound: set[str] = set()
    for sym in table.get_symbols():
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            bound.add(sym.get_name())
    referenced: set[str] = set()
    stack = [table]
    while stack:
        t = stack.pop()
        stack.extend(t.get_children())
        for sym in t.get_symbols():
            name = sym.get_name()
            if t.get_type() != "module" and sym.is_declared_global() and sym.is_assigned():
                bound.add(name)
            if sym.is_referenced() and (t.get_type() == "module" or sym.is_global()):
                referenced.add(name)
    loads: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads[node.id] = min(loads.get(node.id, node.lineno), node.lineno)
    out = []
    for name in sorted(referenced - bound):
        if name in ALLOWED_BUILTINS or name in MODULE_GLOBALS or name in FORBIDDEN_BUILTINS or _is_dunder(name):
            continue  # allowed, or refused by [introspection] already
        if hasattr(builtins, name):
            out.append(Violation("introspection", loads.get(name, 1),
                                 f"the builtin {name!r} is not allowed (classes, raw memory and interpreter "
                                 "internals are out of a solution's reach)"))
        else:
            out.append(Violation("unbound-name", loads.get(name, 1),
                                 f"{name!r} is not bound anywhere in solution.py (nor a builtin): every name must "
                                 "come from an import, a def or an assignment in the file"))
    # Injected names: the interpreter fills in any of them the module lacks at the first launch (a
    # conditional or deleted binding would let the injected value through).
    import_lines: dict[str, list[tuple[int, str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, full in _import_bindings(node):
                import_lines.setdefault(name, []).append((node.lineno, full))
    for name in sorted(bound & set(INTERPRETER_GLOBALS)):
        value = INTERPRETER_GLOBALS[name]
        fulls = import_lines.get(name, [])
        if any(full.split(".")[0] not in ALLOWED_MODULES for _, full in fulls):
            continue  # the import itself is refused ([forbidden-import])
        if fulls and all(_lookup(full) is value for _, full in fulls) and name not in _non_import_bindings(table):
            continue
        line = fulls[0][0] if fulls else loads.get(name, 1)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
                line = node.lineno
                break
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                line = node.lineno
                break
        out.append(Violation("unbound-name", line,
                             f"{name!r} is a name Triton's interpreter injects into the module's globals at the "
                             "first launch; bind it only by importing that very object, or use another name"))
    return out


def _non_import_bindings(table: symtable.SymbolTable) -> set[str]:
    return {s.get_name() for s in table.get_symbols() if (s.is_assigned() or s.is_namespace())}


def _kernel_expr(node: ast.AST, kernels: set[str]) -> bool:
    """A kernel of the file by name, or a conditional choice between such (``_a if c else _b``)."""
    if isinstance(node, ast.IfExp):
        return _kernel_expr(node.body, kernels) and _kernel_expr(node.orelse, kernels)
    return isinstance(node, ast.Name) and node.id in kernels


def _kernel_aliases(func: ast.FunctionDef | ast.AsyncFunctionDef, kernels: set[str]) -> set[str]:
    """Locals of a function that can hold nothing but a kernel of the file (``kernel = _k``, ``kernel = _a
    if c else _b``): every binding of the name in the function, nested scopes included, is a plain
    assignment of one, and it is no parameter. A launch through one is a launch of a kernel; host code
    may read only what it may read off the kernel itself."""
    kernels = kernels - _bound_names(func)  # a kernel's name rebound in the function is no kernel there
    assigned: dict[str, int] = {}
    for n in ast.walk(func):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
                _kernel_expr(n.value, kernels):
            assigned[n.targets[0].id] = assigned.get(n.targets[0].id, 0) + 1
    stores: dict[str, int] = {}
    other = set(_param_names(func.args))
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            stores[n.id] = stores.get(n.id, 0) + 1
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not func:
            other.add(n.name)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not func:
            other |= _param_names(n.args)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            other |= {name for name, _ in _import_bindings(n)}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            other.add(n.name)
    return {name for name, count in assigned.items() if stores.get(name) == count and name not in other}


def _entry_point(tree: ast.Module, functions: dict[str, ast.AST]) -> str | None:
    """The module-level def that ``forward`` is: ``def forward``, or the def it is bound to
    (``forward = fused_add_rmsnorm``, through other such aliases). Each name on the way is bound once at
    module level (and nowhere else), so the def the policy follows is the object the worker calls."""
    stores: dict[str, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stores.setdefault(stmt.name, []).append(stmt)
            continue
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                stores.setdefault(n.id, []).append(stmt)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for name, _ in _import_bindings(n):
                    stores.setdefault(name, []).append(n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores.setdefault(n.name, []).append(n)
    name, seen = "forward", set()
    while name not in seen:
        seen.add(name)
        binding = stores.get(name, [])
        if len(binding) != 1:
            return None
        stmt = binding[0]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and functions.get(name) is stmt:
            return name
        if not (isinstance(stmt, ast.Assign) and stmt in tree.body and len(stmt.targets) == 1 and
                isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Name)):
            return None
        name = stmt.value.id
    return None


def _dead_functions(tree: ast.Module) -> set[str]:
    """Module-level defs nothing that runs can call: test helpers (a torch reference, an
    ``assert_close`` check) left beside forward, or called only from the ``if __name__ == "__main__":``
    block (which _executions has emptied). Everything outside the bodies of undecorated module-level
    defs runs or may hand a def on (module statements, class bodies, decorators, defaults): the names
    it loads are live, and so is every name the body of a live def loads. A decorated def is live
    (its decorator gets the function). A def named nowhere live can be reached only by looking its
    name up (globals(), getattr on the module, frames), which the introspection rules refuse; the
    run-time torch guard holds forward's calls whatever the policy decided. Only [torch-work] is
    waived in a dead def; every other rule applies."""
    defs = {n.name: n for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.decorator_list}
    if sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in defs
           for n in tree.body) != len(defs):
        return set()  # a name defined twice: which object it holds is not for the syntax to say
    pending: list[ast.AST] = []
    for stmt in tree.body:
        if stmt.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and stmt.name in defs:
            pending += [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]
        else:
            pending.append(stmt)
    live, seen = {"forward"}, set()
    while pending:
        for node in ast.walk(pending.pop()):
            if isinstance(node, ast.Name) and node.id not in live:
                live.add(node.id)
                if node.id in defs and node.id not in seen:
                    seen.add(node.id)
                    pending.append(defs[node.id])
        if "forward" in defs and "forward" not in seen:
            seen.add("forward")
            pending.append(defs["forward"])
    return set(defs) - live


def _launch_graph(tree: ast.Module, aliases: dict[str, str]) -> str | None:
    """Why forward launches no kernel defined in the file, or None when it does.

    From ``forward`` (or the def it aliases, _entry_point), every module-level function or binding a
    reachable function names is followed (called, handed to functools.partial, stored in a dict or a
    lambda: it may run). A launch is ``kernel[grid](...)`` on a kernel of the file or on a local that
    holds only kernels (_kernel_aliases), or ``param[grid](...)`` on a parameter of a reachable function
    when a kernel of the file is named on the way (a kernel handed to a launcher); the runtime's own
    count of launches confirms it."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    bindings = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    bindings.update({n.name: n for n in tree.body if isinstance(n, ast.ClassDef)})  # its methods may run
    kernels = {name for name, f in functions.items() if _is_kernel(f, aliases)}
    wrapped = _wrapped_kernels(tree, aliases)
    entry = _entry_point(tree, functions)
    if entry is None or entry in kernels:
        return ("solution.py must define forward(*inputs) once at module level: a def, or a name bound to "
                "one (forward = my_op)")
    if not kernels:
        return "solution.py defines no @triton.jit kernel"
    seen, stack = set(), [entry]
    kernel_named = parameter_launch = False
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in kernels:
            kernel_named = True
            continue
        body = functions.get(name) or bindings.get(name)
        if body is None:
            continue
        function = isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef))
        params = {a.arg for a in ast.walk(body.args) if isinstance(a, ast.arg)} if function else set()
        launchable = kernels | wrapped | (_kernel_aliases(body, kernels | wrapped) if function else set())
        for node in ast.walk(body):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and \
                    isinstance(node.func.value, ast.Name):
                if node.func.value.id in launchable:
                    return None  # kernel[grid](...)
                parameter_launch |= node.func.value.id in params
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                stack.append(node.id)
    if parameter_launch and kernel_named:
        return None
    return (f"forward never launches a @triton.jit kernel defined in solution.py "
            f"(kernels defined: {', '.join(sorted(kernels))}; launch one as kernel[grid](...))")


MAX_SOURCE_CHARS = 256 * 1024
# Module-level try/except ImportError statements a solution may have: the module is checked once per
# combination of their branches.
MAX_IMPORT_FALLBACKS = 3
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
# Modules the worker has imported before it loads a solution, under every Triton it supports: an
# ``import`` of one cannot fail there.
ALWAYS_IMPORTED = frozenset({"torch", "triton", "triton.language", "math", "itertools", "functools", "typing",
                             "dataclasses", "logging", "warnings", "contextlib"})


def _fallback_statement(stmt: ast.stmt, aliases: dict[str, str]) -> ast.stmt | None:
    """One statement of an import fallback's branch as the policy checks it, or None when it has no
    place there: an import, ``pass``, a name bound to a literal (``HAS_LIBDEVICE = False``), or a name
    bound to an imported module or object (``fast_math = tl.math``), rewritten into the import that
    binds the same object (``from triton.language import math as fast_math``) so that every rule an
    imported name gets applies to it."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return stmt
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    name, value = stmt.targets[0].id, stmt.value
    if isinstance(value, ast.Constant):
        return stmt
    dotted = _dotted(value)
    if dotted is None or dotted.split(".")[0] not in aliases:
        return None
    module, _, attr = _resolve_with(aliases, dotted).rpartition(".")
    binding = ast.ImportFrom(module=module, names=[ast.alias(attr, name)], level=0) if module else \
        ast.Import(names=[ast.alias(attr, name)])
    return ast.copy_location(binding, stmt)


def _fallback_branch(stmts: list[ast.stmt], aliases: dict[str, str]) -> list[ast.stmt] | None:
    """A branch of fallback statements as the policy checks it, or None when one has no place there."""
    branch = [_fallback_statement(stmt, aliases) for stmt in stmts]
    return None if None in branch else branch


def _branch_names(stmts: list[ast.stmt]) -> set[str]:
    names = set()
    for stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {name for name, _ in _import_bindings(stmt)}
        elif isinstance(stmt, ast.Assign):
            names |= _stored_names(stmt.targets[0])
    return names


def _literal_attribute_call(node: ast.AST, bound: set[str]) -> bool:
    """``getattr(obj, "name"[, default])`` or ``hasattr(obj, "name")`` (the builtins: not in ``bound``)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in bound):
        return False
    most = {"getattr": 3, "hasattr": 2}.get(node.func.id, 0)
    return not node.keywords and 2 <= len(node.args) <= most and isinstance(node.args[1], ast.Constant) \
        and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier() \
        and not any(isinstance(a, ast.Starred) for a in node.args)


def _feature_test(node: ast.stmt, aliases: dict[str, str], bound: set[str]
                  ) -> tuple[list[ast.stmt], list[ast.stmt]] | None:
    """(the branch taken when the attribute is there, the other) for ``if hasattr(tl, "libdevice"):
    <fallback> else: <fallback>`` at module level (``not hasattr`` too), or None. Like an import
    fallback (_import_fallback): both branches only imports, literals and aliases, binding the same
    names; the test itself, an imported name's attribute by a literal, opens each branch, so that it is
    checked as that attribute."""
    if not isinstance(node, ast.If) or not node.orelse:
        return None
    test = node.test.operand if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not) \
        else node.test
    if not (_literal_attribute_call(test, bound) and test.func.id == "hasattr" and
            isinstance(test.args[0], ast.Name) and test.args[0].id in aliases):
        return None
    branches = [_fallback_branch(stmts, aliases) for stmts in (node.body, node.orelse)]
    names = _branch_names(node.body)
    if None in branches or not names or _branch_names(node.orelse) != names:
        return None
    return tuple([ast.copy_location(ast.Expr(copy.deepcopy(test)), node)] + b for b in branches)


def _never_fails(stmts: list[ast.stmt]) -> bool:
    """Whether a try body cannot raise ImportError in any worker: plain imports of modules every worker
    has loaded before the solution (torch, triton, triton.language, the allowed standard modules),
    and literals (``HAS_TRITON = True``)."""
    return all(isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) or
               isinstance(stmt, ast.Import) and all(a.name in ALWAYS_IMPORTED for a in stmt.names)
               for stmt in stmts)


def _import_fallback(node: ast.stmt, aliases: dict[str, str], bound: set[str]
                     ) -> tuple[list[ast.stmt], ...] | None:
    """(what runs when the imports succeed, what runs when one fails) for ``try: <imports> except
    ImportError: <fallback>`` at module level, or None for any other try statement ([try-except]).
    Both branches may hold only imports, literals and aliases of imported names (_fallback_statement),
    so neither can do work, and must bind the same names, so that whichever ran (the fallback after
    some of the imports did, too) the module's names are those of one branch: the policy checks the
    module once with each. A fallback that never runs (_never_fails: ``try: import triton ...
    HAS_TRITON = True except ImportError: HAS_TRITON = False``) may bind fewer names; only the try
    branch is checked then. One handler, of ImportError or ModuleNotFoundError (not rebound), without
    ``as``; no else or finally."""
    if not isinstance(node, ast.Try) or node.orelse or node.finalbody or len(node.handlers) != 1:
        return None
    handler = node.handlers[0]
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if handler.name is not None or not caught or not all(
            isinstance(c, ast.Name) and c.id in IMPORT_ERRORS and c.id not in bound for c in caught):
        return None
    branches = [_fallback_branch(stmts, aliases) for stmts in (node.body, handler.body)]
    names = _branch_names(node.body)
    if None in branches:
        return None
    if names and _never_fails(node.body) and _branch_names(handler.body) <= names:
        return (branches[0],)
    if not names or _branch_names(handler.body) != names:
        return None
    return branches[0], branches[1]


def _executions(tree: ast.Module, bound: set[str]) -> list[ast.Module]:
    """The module as it can run, each checked by every rule: the body of ``if __name__ == "__main__":``
    left out (it never runs: the worker names the module ``solution`` and no binding of ``__name__`` is
    allowed), so nothing it binds counts as bound (a name it imports would otherwise be used elsewhere
    as bound, and Triton's interpreter fills unbound names in: h04), and each module-level import
    fallback or ``hasattr`` feature test replaced by one of its branches, every combination. The tree
    itself when neither is there."""
    aliases = _all_aliases(tree)
    fallbacks = {i: branches for i, stmt in enumerate(tree.body)
                 if (branches := _import_fallback(stmt, aliases, bound) or _feature_test(stmt, aliases, bound))
                 is not None}
    guards = [i for i, stmt in enumerate(tree.body) if _is_main_guard(stmt) and stmt.body]
    if not fallbacks and not guards:
        return [tree]
    runs = []
    checked = sorted(fallbacks)[:MAX_IMPORT_FALLBACKS]  # the rest stay [try-except]
    for choice in itertools.product(*(range(len(fallbacks[i])) for i in checked)):
        picked = dict(zip(checked, choice))
        body = []
        for i, stmt in enumerate(tree.body):
            if i in picked:
                body.extend(copy.deepcopy(fallbacks[i][picked[i]]))
            elif i in guards:
                guard = copy.deepcopy(stmt)
                guard.body = [ast.copy_location(ast.Pass(), stmt.body[0])]
                body.append(guard)
            else:
                body.append(copy.deepcopy(stmt))
        runs.append(ast.Module(body=body, type_ignores=[]))
    return runs


def _check_run(tree: ast.Module, table: symtable.SymbolTable, source_lines: list[str], allowed_torch: frozenset[str],
               forbidden_imports: frozenset[str]) -> list[Violation]:
    """Every rule on one execution of the module (see _executions)."""
    aliases = _all_aliases(tree)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._d2k_parent = node
    checker = _Checker(allowed_torch, forbidden_imports)
    checker.all_aliases = aliases
    checker.kernel_names = {n.name for n in tree.body if _is_kernel(n, aliases)}
    checker.wrapped_kernels = _wrapped_kernels(tree, aliases)
    checker.dead_functions = _dead_functions(tree)
    checker.source_lines = source_lines
    bound = _module_bound(table)
    checker.module_bound = bound
    checker.constants, checker.limits = _module_constants(tree, aliases, bound)
    checker.mutable_globals = _module_mutables(tree, aliases)
    checker.compiler_globals = _compiler_globals(tree, aliases)
    checker.protected = set(aliases) | MODULE_NAMES
    checker.visit(tree)
    checker.violations.extend(_name_problems(tree, table, aliases))
    checker.violations.extend(_module_level_calls(tree, aliases, bound))
    checker.violations.extend(_module_level_state(tree, aliases, checker.mutable_globals, bound))
    checker.violations.extend(_decorators_only(tree, aliases))
    checker.violations.extend(_gpu_compile_problems(tree, aliases, bound))
    problem = _launch_graph(tree, aliases)
    if problem:
        checker.violations.append(Violation("no-kernel", 1, problem))
    return checker.violations


def check_solution(source: str, allowed_torch: frozenset[str] = frozenset(),
                   forbidden_imports: frozenset[str] = frozenset({"d2k_env", "baseline", "reference"})
                   ) -> list[Violation]:
    """All policy violations in ``source`` (empty when the solution may run)."""
    if len(source) > MAX_SOURCE_CHARS:  # the checks are superlinear on some inputs: refuse before parsing
        return [Violation("source-size", 1, f"solution.py has {len(source)} characters; at most "
                                            f"{MAX_SOURCE_CHARS} are allowed")]
    problems = text_problems(source)
    if problems:  # checked before parsing: line numbers in the rest would not be Triton's
        return [Violation("source-text", line, message) for line, message in problems]
    violations: dict[tuple[str, int, str], Violation] = {}
    try:
        tree = ast.parse(source)
        table = symtable.symtable(source, "solution.py", "exec")
        source_lines = [line.rstrip("\r\n") for line in tokenizer_lines(source)]
        for run in _executions(tree, _module_bound(table)):
            # The names each execution binds: its own symbol table (line numbers come from the nodes,
            # which keep the source's).
            run_table = table if run is tree else symtable.symtable(ast.unparse(run), "solution.py", "exec")
            for v in _check_run(run, run_table, source_lines, allowed_torch, forbidden_imports):
                violations.setdefault((v.rule, v.line, v.message), v)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"SyntaxError: {exc.msg}")]
    except (RecursionError, MemoryError):
        return [Violation("syntax", 1, "the code is nested too deeply to be checked")]
    except Exception as exc:  # fail closed: a file the checker cannot analyse does not run
        return [Violation("syntax", 1, f"the file could not be checked ({type(exc).__name__}: {exc})"[:300])]
    return sorted(violations.values(), key=lambda v: v.line)
