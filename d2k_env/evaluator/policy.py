"""Static policy for solution.py, checked on the syntax tree before anything runs.

A solution must define ``forward``, and ``forward`` must (directly or through helpers defined in
the file) launch a ``@triton.jit`` kernel defined in the file. Host code may use torch only for
what the task allows (allocation, views, reshapes, shape and dtype queries): the work itself
belongs in Triton kernels. Everything that could reach the harness (introspection, dynamic
import, processes, threads, files, streams and graphs) is refused. Each violation names its rule
and line; any violation scores 0.

Triton kernel bodies may use tensor methods freely (they are Triton's), but no torch at all: the
GPU could not compile it, and only the CPU interpreter would run it as Python. The import and
introspection rules apply to the whole file.
"""

from __future__ import annotations

import ast
import importlib
import types
from dataclasses import dataclass

import torch

# Few and small on purpose: pure helper modules re-export escape hatches (enum.bltns is builtins,
# operator.attrgetter takes dunder names as strings, functools.update_wrapper sets attributes,
# functools.lru_cache replays outputs keyed by argument identity).
ALLOWED_MODULES = frozenset({"torch", "triton", "math", "itertools", "functools", "__future__"})
RESTRICTED_MODULE_NAMES = {"functools": frozenset({"partial", "reduce"})}
# Builtins a Triton kernel body may name (the interpreter runs bodies as Python: anything else
# reachable from a kernel could do the work outside Triton).
KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs", "print", "isinstance",
                             "True", "False", "None"})
# Methods that mutate a container: host code may not keep state between calls (output replay).
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
                              "add", "discard", "remove"})

# Attribute names that lead out of the sandbox whatever object they hang off: interpreter frames
# and code objects (a frame walk reaches the harness), and modules that other modules re-export
# (torch.os, torch.sys, ...).
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await",
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "co_code",
    "co_consts", "os", "sys", "builtins", "importlib", "inspect", "gc", "ctypes", "subprocess", "threading",
    "multiprocessing", "signal", "socket", "shutil", "pathlib", "io", "pickle", "marshal",
})

# Builtins that reach interpreter internals, files or code objects, or dodge the checks above.
FORBIDDEN_BUILTINS = frozenset({"__import__", "eval", "exec", "compile", "open", "getattr", "setattr", "delattr",
                                "globals", "locals", "vars", "breakpoint", "input", "exit", "quit"})

# torch attributes any solution may use: types, dtypes and device queries.
ALWAYS_ALLOWED_TORCH = frozenset({
    "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "is_tensor",
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "int32", "int", "int64", "long", "bool",
    "cuda.get_device_properties", "cuda.current_device", "cuda.device_count", "cuda.is_available",
    "cuda.get_device_capability",
})

# Tensor methods host code may call: views, reshapes and shape/layout queries. Every other
# method torch.Tensor has computes, copies, synchronises or mutates.
ALLOWED_TENSOR_METHODS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "contiguous", "is_contiguous", "stride", "size", "dim", "ndimension",
    "numel", "nelement", "element_size", "data_ptr", "storage_offset", "get_device", "unsqueeze", "squeeze",
    "flatten", "unflatten", "transpose", "permute", "t", "expand", "expand_as", "as_strided", "narrow", "select",
    "unbind", "chunk", "split", "movedim", "new_empty", "new_empty_strided", "is_floating_point",
})
TENSOR_METHODS = frozenset(n for n in dir(torch.Tensor) if not n.startswith("__"))

JIT_DECORATORS = frozenset({"jit", "autotune", "heuristics"})


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


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


def _decorator_name(node: ast.AST) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return (_dotted(target) or "").rsplit(".", 1)[-1]


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed_torch: frozenset[str], forbidden_imports: frozenset[str]):
        self.allowed_torch = ALWAYS_ALLOWED_TORCH | allowed_torch
        self.forbidden_imports = forbidden_imports
        self.violations: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> fully qualified module or object
        self.in_kernel = False
        self.kernel_names: set[str] = set()  # set by check_solution: module-level jit functions
        self.constants: set[str] = set()  # module-level names bound to literals
        self.scope_locals: set[str] | None = None  # names bound in the function being visited

    def flag(self, rule: str, node: ast.AST, message: str) -> None:
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
        return True

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if self._check_module(a.name, node):
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag("forbidden-import", node, "relative imports are not allowed")
            return
        if self._check_module(node.module or "", node):
            for a in node.names:
                if a.name == "*":
                    self.flag("forbidden-import", node, "star imports are not allowed")
                else:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    self._check_torch_name(f"{node.module}.{a.name}", node)
                    self._check_restricted(f"{node.module}.{a.name}", node)

    # -- torch use in host code ----------------------------------------------------------------------
    def _resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        return dotted if full is None else (f"{full}.{rest}" if rest else full)

    def _check_torch_name(self, full: str, node: ast.AST) -> None:
        if not (full == "torch" or full.startswith("torch.")):
            return
        if self.in_kernel:  # Triton cannot compile torch calls; only the CPU interpreter would run them
            self.flag("torch-work", node, f"{full} inside a @triton.jit kernel is not allowed")
            return
        rel = full[len("torch."):] if full != "torch" else ""
        if rel and rel not in self.allowed_torch:
            self.flag("torch-work", node, f"torch.{rel} is not allowed in host code; the work must be done by "
                                          f"Triton kernels (allowed here: {', '.join(sorted(self.allowed_torch))})")

    def _check_restricted(self, full: str, node: ast.AST) -> None:
        root, _, rest = full.partition(".")
        allowed = RESTRICTED_MODULE_NAMES.get(root)
        if allowed is not None and rest.split(".")[0] not in allowed:
            self.flag("forbidden-import", node, f"{full} is not allowed; from {root} only "
                                                f"{', '.join(sorted(allowed))} may be used")

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

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr.endswith("__"):
            self.flag("introspection", node, f"dunder attribute {node.attr!r} is not allowed")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.flag("introspection", node, f"the attribute {node.attr!r} (frames, code objects, system modules) "
                                             "is not allowed")
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            # Whatever the object (torch.Tensor passed through a parameter, a kernel, a module):
            # solutions never need to set attributes, and tampering always does.
            target = self._resolve(_dotted(node.value) or "?")
            self.flag("tampering", node, f"assigning or deleting attributes ({target}.{node.attr}) is not allowed")
        dotted = _dotted(node)
        if dotted is not None:
            root = dotted.split(".")[0]
            if root in FORBIDDEN_BUILTINS and root not in self.aliases:
                self.flag("introspection", node, f"the builtin {root!r} is not allowed")
            self._check_torch_name(self._resolve(dotted), node)
            self._check_restricted(self._resolve(dotted), node)
            if self.in_kernel:
                self._check_kernel_name(dotted.split(".")[0], node)
            return  # the chain's prefixes are not separate uses
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.aliases:
            self.flag("introspection", node, f"the builtin {node.id!r} is not allowed")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ("__name__",):
            self.flag("introspection", node, f"{node.id!r} is not allowed")
        else:
            full = self._resolve(node.id)
            self._check_torch_name(full, node)
            self._check_restricted(full, node)
            # Reached only when the name is not the root of an attribute chain: a module passed,
            # stored or iterated would carry it past every rule above.
            if node.id in self.aliases and self._is_module(full):
                self.flag("introspection", node, f"the module {full} may only be used as {node.id}.<name>")
            if self.in_kernel and isinstance(node.ctx, ast.Load):
                self._check_kernel_name(node.id, node)

    def _check_kernel_name(self, name: str, node: ast.AST) -> None:
        allowed = self.scope_locals | self.kernel_names | self.constants | KERNEL_BUILTINS
        if name not in allowed and self._resolve(name).split(".")[0] not in ("triton", "math"):
            self.flag("torch-work", node, f"a Triton kernel may read only its arguments, its locals, triton, math, "
                                          f"other kernels and module-level constants, not {name!r}")

    def _check_state(self, target: ast.AST, node: ast.AST) -> None:
        if self.scope_locals is not None and isinstance(target, ast.Name) and target.id not in self.scope_locals:
            self.flag("hidden-state", node, f"{target.id!r} is not local: host code may not keep state between "
                                            "calls (replaying outputs across calls is an exploit)")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._check_state(node.value, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATING_METHODS:
            self._check_state(func.value, node)
        if not self.in_kernel and isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS \
                and func.attr not in ALLOWED_TENSOR_METHODS:
            base = _dotted(func.value)
            base_root = self._resolve(base).split(".")[0] if base else None
            if base_root not in ALLOWED_MODULES:
                self.flag("torch-work", node, f"the tensor method .{func.attr}() is not allowed in host code "
                                              "(only views, reshapes and shape queries are); do the work in a "
                                              "Triton kernel")
        self.generic_visit(node)

    # -- structure -----------------------------------------------------------------------------------
    def visit_Try(self, node: ast.AST) -> None:
        self.flag("try-except", node, "try/except is not allowed: a failing kernel must fail, not fall back")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        kernel = any(_decorator_name(d) in JIT_DECORATORS for d in node.decorator_list)
        outer, self.in_kernel = self.in_kernel, self.in_kernel or kernel
        outer_locals, self.scope_locals = self.scope_locals, _bound_names(node)
        for child in node.body:
            self.visit(child)
        for default in node.args.defaults + node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        self.in_kernel, self.scope_locals = outer, outer_locals

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Global(self, node: ast.Global) -> None:
        self.flag("introspection", node, "global statements are not allowed")

    visit_Nonlocal = visit_Global


def _bound_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters and every name the function (or a nested scope in it) binds."""
    a = func.args
    names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not func:
            names |= {p.arg for p in node.args.args + node.args.kwonlyargs}
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
    return names


def _module_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound once to a literal or a tl.constexpr(...) of one."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            if isinstance(value, ast.Constant) or (isinstance(value, ast.UnaryOp) and
                                                   isinstance(value.operand, ast.Constant)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _launch_graph(tree: ast.Module) -> str | None:
    """Why forward launches no kernel defined in the file, or None when it does."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    kernels = {name for name, f in functions.items()
               if any(_decorator_name(d) in JIT_DECORATORS for d in f.decorator_list)}
    if "forward" not in functions:
        return "solution.py must define a module-level function forward(*inputs)"
    if not kernels:
        return "solution.py defines no @triton.jit kernel"
    seen, stack = set(), ["forward"]
    while stack:
        name = stack.pop()
        if name in seen or name not in functions or name in kernels:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in kernels:
                    return None  # kernel[grid](...)
                if isinstance(func, ast.Name):
                    stack.append(func.id)
    return (f"forward never launches a @triton.jit kernel defined in solution.py "
            f"(kernels defined: {', '.join(sorted(kernels))}; launch one as kernel[grid](...))")


def check_solution(source: str, allowed_torch: frozenset[str] = frozenset(),
                   forbidden_imports: frozenset[str] = frozenset({"d2k_env", "baseline", "reference"})
                   ) -> list[Violation]:
    """All policy violations in ``source`` (empty when the solution may run)."""
    try:
        tree = ast.parse(source)
        checker = _Checker(allowed_torch, forbidden_imports)
        checker.kernel_names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                                and any(_decorator_name(d) in JIT_DECORATORS for d in n.decorator_list)}
        checker.constants = _module_constants(tree)
        checker.visit(tree)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"SyntaxError: {exc.msg}")]
    except (RecursionError, MemoryError):
        return [Violation("syntax", 1, "the code is nested too deeply to be checked")]
    problem = _launch_graph(tree)
    if problem:
        checker.violations.append(Violation("no-kernel", 1, problem))
    return sorted(checker.violations, key=lambda v: v.line)
