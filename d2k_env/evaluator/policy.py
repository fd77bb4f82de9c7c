"""Static policy for solution.py, checked on the syntax tree before anything runs.

Since the trust boundary moved, the solution's Python is untrusted and harmless to the reward: the
solution process only records forward's launches (recorder.py), and a trusted replay process rebuilds
the recorded kernels from the source text this policy checked, runs them on the secret inputs and
does all timing (replay.py). Nothing else of the solution is run there. So the policy checks only
what that replay relies on; forward's and the module's Python (imports, try/except, classes, wrapper
objects, contextlib, helpers that call torch, autotune applied by call, ...) is free.

What each rule refuses, and what an honest solution does instead, is said once, in the rule
registry (rules.py), which the verdicts, docs/security.md and the prompt read. Below: how this
module checks it.

===================  ==========================================================================
rule                 how it is checked here
===================  ==========================================================================
[source-size]        sources over 256 KB, before parsing (the checks are superlinear on some inputs)
[source-text]        characters that end a line for str.splitlines/linecache but not for Python's
                     tokenizer, anywhere: Triton re-reads kernel text by line number (source_text.py)
[syntax]             a file that does not parse, or nests too deeply to be checked
[no-kernel]          no module-level binding of ``forward`` (whether forward launches a kernel of the
                     file is the recorder's to see)
[kernel-source]      a ``@triton.jit`` function anywhere but at the top level (nested in a function
                     or a class, ``async``), ``triton.jit(f)`` of anything but a top-level ``def``:
                     the replay rebuilds only top-level defs; and in a kernel's lines, a line other
                     than its own def line that starts with ``def`` (a docstring's, a string's):
                     Triton re-reads the kernel's text and would start the function there
[kernel-language]    a kernel body outside Triton's language: kernel_language.problems, the replay's
                     own check, on every kernel (a top-level def decorated with or passed to
                     ``triton.jit``), with the namespace the replay gives it (the static one here:
                     the imported Triton modules and math as modules, the kernels, module
                     constants)
===================  ==========================================================================

The checker fails closed: a file it cannot analyse is refused, never a crash. The exploits are in
tests/security/ (a folder per threat class, run by tests/test_security.py).
"""

from __future__ import annotations

import ast
import copy
import importlib
import re

import triton.language as tl

from d2k_env.evaluator import kernel_language
from d2k_env.evaluator.recording import KERNEL_MODULES
from d2k_env.evaluator.rules import Violation
from d2k_env.evaluator.source_text import text_problems, tokenizer_lines

MAX_SOURCE_CHARS = 256 * 1024
# What makes a function a kernel, resolved through the file's imports (``from triton import jit``).
JIT = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})
CONSTEXPR = frozenset({"triton.language.constexpr", "triton.language.core.constexpr"})
# A line Triton's interpreter takes for a function's start (inspect and its own rewriter look for it).
_DEF_LINE = re.compile(r"(async\s+)?def(\s|\\|$)")


class _Kernel:
    """A kernel's (or a kernel wrapper's) name in the static namespace: a global a kernel may call."""


class _Value:
    """A module-level value the policy cannot compute (``fp8_info = torch.finfo(...)``): a global that
    is neither a module nor a plain Python value."""


def check_solution(source: str, allowed_torch: frozenset[str] = frozenset()) -> list[Violation]:
    """All policy violations in ``source`` (empty when the solution may be recorded and replayed).

    ``allowed_torch`` (the task's allow-list) is the recorder's to apply now: host code's torch
    work changes nothing the replay runs, so the policy takes it and reads nothing of it."""
    del allowed_torch
    if len(source) > MAX_SOURCE_CHARS:
        return [Violation("source-size", 1, f"solution.py has {len(source)} characters; at most "
                                            f"{MAX_SOURCE_CHARS} are allowed")]
    problems = text_problems(source)
    if problems:  # checked before parsing: line numbers in the rest would not be Triton's
        return [Violation("source-text", line, message) for line, message in problems]
    try:
        tree = ast.parse(source)
        found = _Solution(tree, [line.rstrip("\r\n") for line in tokenizer_lines(source)]).violations()
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"SyntaxError: {exc.msg}")]
    except (RecursionError, MemoryError):
        return [Violation("syntax", 1, "the code is nested too deeply to be checked")]
    except Exception as exc:  # fail closed: a file the checker cannot analyse does not run
        return [Violation("syntax", 1, f"the file could not be checked ({type(exc).__name__}: {exc})"[:300])]
    unique = {(v.rule, v.line, v.message): v for v in found}
    return sorted(unique.values(), key=lambda v: v.line)


class _Solution:
    """One parsed solution.py: its imports, kernels and module constants, and what breaks the rules."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.tree, self.lines = tree, lines
        self.top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.aliases = self._aliases()
        self.found: list[Violation] = []

    def violations(self) -> list[Violation]:
        if not self._binds_forward():
            self.found.append(Violation("no-kernel", 1, "solution.py must define forward(*inputs) at module level "
                                                        "(def forward, or forward = <a function or callable>)"))
        kernels = self._kernels()
        namespace = self._namespace(kernels)
        # A kernel another kernel names is a device function (or a combine function) and may return a value.
        called = {n.id for k in kernels.values() for stmt in k.body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        for name, node in kernels.items():
            self._def_lines(node)
            bare = copy.copy(node)
            bare.decorator_list = []
            for line, message in kernel_language.located(bare, namespace, launched=name not in called):
                self.found.append(Violation("kernel-language", line, f"kernel {name}: {message}"))
        return self.found

    def _binds_forward(self) -> bool:
        """Whether a module-level statement binds ``forward`` (the worker calls nothing else; a file
        without it is refused here, before any process starts)."""
        for node in self._module_statements():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "forward":
                return True
            if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name.split(".")[0]) == "forward" for a in node.names):
                return True
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            if any(isinstance(n, ast.Name) and n.id == "forward" for t in targets for n in ast.walk(t)):
                return True
        return False

    # -- names --------------------------------------------------------------------------------------
    def _aliases(self) -> dict[str, str]:
        """Local name -> the dotted name it stands for: every import of the file, and module-level
        aliases of those (``jit = triton.jit``)."""
        aliases: dict[str, str] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                dotted = self._resolve_with(aliases, node.value)
                if dotted is not None:
                    aliases[node.targets[0].id] = dotted
        return aliases

    @staticmethod
    def _resolve_with(aliases: dict[str, str], node: ast.AST) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in aliases:
            return None
        return ".".join([aliases[node.id], *reversed(parts)])

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` stands for through the imports (``tl.constexpr`` ->
        ``triton.language.constexpr``), or None."""
        return self._resolve_with(self.aliases, node)

    def _is_jit(self, node: ast.AST) -> bool:
        """``triton.jit`` itself, or a call of it with options only (``triton.jit(do_not_specialize=...)``)."""
        if isinstance(node, ast.Call) and not node.args:
            node = node.func
        return self.resolve(node) in JIT

    # -- kernels ------------------------------------------------------------------------------------
    def _kernels(self) -> dict[str, ast.FunctionDef]:
        """The top-level defs that are kernels; a jit function anywhere else is [kernel-source]."""
        kernels: dict[str, ast.FunctionDef] = {}
        decorators = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                jit = [d for d in node.decorator_list if self._is_jit(d)]
                decorators.update(id(d) for d in node.decorator_list)
                if not jit:
                    continue
                if self.top.get(node.name) is node:
                    kernels[node.name] = node
                else:
                    self._refuse_source(node, f"the @triton.jit function {node.name!r} is not a plain def at the "
                                              "top level of solution.py: only those are rebuilt and run")
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call) or id(node) in decorators or not node.args:
                continue
            if self.resolve(node.func) in JIT or (isinstance(node.func, ast.Call) and self._is_jit(node.func)):
                target = node.args[0]
                if isinstance(target, ast.Name) and target.id in self.top:
                    kernels[target.id] = self.top[target.id]
                else:
                    self._refuse_source(node, f"triton.jit is applied to {ast.unparse(target)[:60]!r}: only a "
                                              "function defined with def at the top level of solution.py is "
                                              "rebuilt and run as a kernel")
        return kernels

    def _refuse_source(self, node: ast.AST, message: str) -> None:
        self.found.append(Violation("kernel-source", node.lineno, message))

    def _def_lines(self, node: ast.FunctionDef) -> None:
        """[kernel-source]: Triton re-reads a kernel's text (inspect.getsourcelines) and takes the last
        line whose stripped text begins with "def " for the function's start (the interpreter's
        rewriter) or the first (the GPU's JITFunction): such a line inside a docstring, a string or a
        decorator's arguments would become the code that runs. Only the real def line may read so."""
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if not self._line(node.lineno).startswith("def "):
            self._refuse_source(node, f"the def line of kernel {node.name!r} must read 'def {node.name}(...)' "
                                      "(Triton finds kernels by it)")
        for lineno in range(first, (node.end_lineno or node.lineno) + 1):
            if lineno != node.lineno and _DEF_LINE.match(self._line(lineno)):
                self.found.append(Violation("kernel-source", lineno, f"line {lineno} of kernel {node.name!r} begins "
                                            "with 'def' (in a docstring, a string or a decorator): Triton would run "
                                            "the function from that line, not from the real def; reword or "
                                            "re-indent it"))

    def _line(self, lineno: int) -> str:
        return self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""

    # -- the replay's namespace, statically ---------------------------------------------------------
    def _namespace(self, kernels: dict[str, ast.FunctionDef]) -> dict:
        """The globals a kernel would run with in the replay: the Triton modules and math the file
        imports (the modules a recording may name) and the functions it imports from Triton's
        language modules, the kernels and kernel wrappers, and module constants: a literal as its
        value (a body may not read it: the GPU compiler would not), a ``tl.constexpr(...)`` as a
        constexpr, anything else as an opaque value."""
        namespace: dict = {}
        for name, dotted in self.aliases.items():
            module, _, attr = dotted.rpartition(".")
            if dotted in KERNEL_MODULES:
                namespace[name] = importlib.import_module(dotted)
            elif module in KERNEL_MODULES and module.startswith("triton.language") and \
                    callable(getattr(importlib.import_module(module), attr, None)):
                # A function of the language imported by name (from ...libdevice import rsqrt): the
                # recording decides whether the replay can be given it.
                namespace[name] = getattr(importlib.import_module(module), attr)
        for node in self._module_statements():
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        if name not in namespace or not isinstance(namespace[name], type(tl)):
                            namespace[name] = self._constant(node.value, single=isinstance(target, ast.Name))
        for name in kernels:
            namespace[name] = _Kernel()
        return namespace

    def _module_statements(self) -> list[ast.stmt]:
        """The statements that run at module level: the module body and its if/try/with/for blocks."""
        found, pending = [], list(self.tree.body)
        while pending:
            stmt = pending.pop(0)
            found.append(stmt)
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.excepthandler):
                        pending.extend(child.body)
                    elif isinstance(child, ast.stmt):
                        pending.append(child)
        return found

    def _constant(self, value: ast.AST, single: bool):
        if not single:
            return _Value()
        if isinstance(value, ast.Call) and self.resolve(value.func) in CONSTEXPR:
            return tl.constexpr(None)
        if isinstance(value, ast.Call) and (self.resolve(value.func) in JIT or self._is_jit(value.func)):
            return _Kernel()
        try:
            return ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return _Value()
