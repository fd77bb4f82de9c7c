"""What a task spec file declares about itself, read from its source without executing it.

Loading a task runs its spec, which imports torch (seconds). ``d2k list`` and the CLI's checks of
its arguments only need the spec's title, family and workload names, which specs write as
literals: ``TASK = TaskSpec(title="...", family="...", workloads=WORKLOADS, ...)`` with
``WORKLOADS = [Workload("4096x4096", {"M": 4096, "N": 4096}), ...]``. :func:`read_outline` reads
them from the syntax tree, evaluating literals only (:func:`ast.literal_eval`), never a call.

It answers ``None`` (the caller then loads the task) wherever the source could mean something
else than it reads: a field that is no literal, nor a name bound once to one; a name used
anywhere else (``WORKLOADS.append(...)`` could change it), ``TASK`` too; ``globals()``, ``exec``
or ``sys`` used at all; ``TaskSpec`` or ``Workload`` not imported from the task-author API, or
bound twice. A spec it outlines may still fail to load (the outline checks no field): the
outline describes, it does not validate.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from d2k_env.task import Task, Workload

_API_MODULES = ("d2k_env.tasks", "d2k_env.task")
# Names through which a module can rebind or change its globals without naming them.
_REFLECTION = ("globals", "vars", "locals", "exec", "eval", "setattr", "__import__", "sys")


@dataclass(frozen=True)
class Outline:
    """A task's title, family and workloads, as its spec declares them."""

    title: str
    family: str
    workloads: tuple[Workload, ...]
    smoke_workloads: tuple[Workload, ...]

    @classmethod
    def of_task(cls, task: Task) -> "Outline":
        """The outline of a loaded task."""
        return cls(task.title, task.family, tuple(task.workloads), tuple(task.smoke_workloads))


class _NotLiteral(Exception):
    """Some part of the spec cannot be read without running it."""


def read_outline(spec_path: str | Path) -> Outline | None:
    """The outline of the spec at ``spec_path``, or ``None`` when it cannot be read safely without
    executing the file (see the module docstring); an unreadable file or bad syntax is ``None`` too:
    loading the task then reports it."""
    try:
        tree = ast.parse(Path(spec_path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    try:
        return _Reader(tree).outline()
    except _NotLiteral:
        return None


class _Reader:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.bound: dict[str, list[ast.stmt]] = {}  # each top-level name -> the statements binding it
        self.uses = Counter(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
        for stmt in tree.body:
            for name in _bindings(stmt):
                self.bound.setdefault(name, []).append(stmt)
        declared = {n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        for name in declared:  # a function may rebind it
            self.bound.setdefault(name, []).append(tree)

    def outline(self) -> Outline:
        if any(self.uses[name] for name in _REFLECTION) or self.uses["TASK"] != 1:  # as TASK.workloads.append()
            raise _NotLiteral
        call = self._single_value("TASK")
        if not (isinstance(call, ast.Call) and self._is_api(call.func, "TaskSpec")):
            raise _NotLiteral
        fields = {kw.arg: kw.value for kw in call.keywords}
        if call.args or None in fields:
            raise _NotLiteral
        title, family = self._literal(fields.get("title")), self._literal(fields.get("family"))
        if not (isinstance(title, str) and isinstance(family, str)):
            raise _NotLiteral
        return Outline(title, family, self._workloads(fields.get("workloads")),
                       self._workloads(fields.get("smoke_workloads")))

    def _single_value(self, name: str) -> ast.expr:
        """The value of ``name``'s one top-level binding, a plain ``name = value``."""
        stmts = self.bound.get(name, [])
        if len(stmts) != 1 or not isinstance(stmts[0], ast.Assign) or len(stmts[0].targets) != 1:
            raise _NotLiteral
        return stmts[0].value

    def _resolve(self, node: ast.expr | None) -> ast.expr:
        """``node``, or the value of the name it is when that name is bound once and used only
        here (its binding and this use: two occurrences)."""
        if node is None:
            raise _NotLiteral
        if isinstance(node, ast.Name):
            if self.uses[node.id] != 2:
                raise _NotLiteral
            return self._single_value(node.id)
        return node

    def _literal(self, node: ast.expr | None):
        try:
            return ast.literal_eval(self._resolve(node))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise _NotLiteral from None

    def _workloads(self, node: ast.expr | None) -> tuple[Workload, ...]:
        node = self._resolve(node)
        if not isinstance(node, (ast.List, ast.Tuple)):
            raise _NotLiteral
        workloads = []
        for item in node.elts:
            if not (isinstance(item, ast.Call) and self._is_api(item.func, "Workload")):
                raise _NotLiteral
            args = [self._literal(a) for a in item.args]
            kwargs = {kw.arg: self._literal(kw.value) for kw in item.keywords}
            if None in kwargs:
                raise _NotLiteral
            try:
                workloads.append(Workload(*args, **kwargs))
            except TypeError:
                raise _NotLiteral from None
        return tuple(workloads)

    def _is_api(self, func: ast.expr, name: str) -> bool:
        """Whether ``func`` is the task-author API's ``name``, imported once under its own name."""
        if not (isinstance(func, ast.Name) and func.id == name):
            return False
        stmts = self.bound.get(name, [])
        if not (len(stmts) == 1 and isinstance(stmts[0], ast.ImportFrom) and stmts[0].level == 0
                and stmts[0].module in _API_MODULES):
            return False
        return any(a.name == name and a.asname in (None, name) for a in stmts[0].names)


def _bindings(stmt: ast.stmt) -> list[str]:
    """The top-level names ``stmt`` binds (a function's or class's own name, not its locals)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    names = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return names
