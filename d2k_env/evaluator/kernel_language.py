"""Whether a kernel's source stays inside Triton's language: the one check of a kernel body.

The trusted replay (:mod:`d2k_env.evaluator.replay`) rebuilds each kernel from the source text the
policy checked and runs it: compiled by Triton's front end on the GPU, executed as Python by the
interpreter on the CPU. On the CPU that body *is* Python running in the trusted process, so it must
be nothing but the language: calls of ``tl`` functions and of other kernels, arithmetic, indexing and
control flow over its parameters and constants. The static policy (:mod:`d2k_env.evaluator.policy`)
runs the same :func:`problems` on every kernel of solution.py before anything runs, so a kernel the
replay would refuse is refused first, with its line.

Rules, each a construct Triton's GPU front end refuses (so an honest kernel never breaks one, and a
kernel that breaks one could only have run on the interpreter, as Python):

- no imports, classes, nested functions or lambdas, ``global``/``nonlocal``, ``try``/``with``/
  ``raise``, comprehensions, ``yield``/``await``, ``del``, ``break``/``continue``, ``:=``, set and dict
  displays, ``match``: any statement or expression the GPU code generator has no visitor for;
- no chained comparison (``0 <= i < n``), ``in``/``not in``, ``@``; one plain assignment target;
- loops only over ``range``, ``tl.range`` or ``tl.static_range``, with a single name as target; no
  loop ``else`` (but after ``tl.static_range``), no ``while`` on a constant, no ``return`` in a loop or
  a ``with``; a launched kernel returns nothing (``launched=True``: only a device function may);
- no name or attribute that starts with an underscore (``__builtins__``, ``_semantic``, ...);
- a name is a parameter, a local, a global the recording supplies, or one of :data:`BUILTINS`; a body
  reads no global that is a plain Python value (a number not bound with ``tl.constexpr``);
- an attribute of a module reaches only Triton's language (``tl.*``, ``libdevice.*``) and the
  numbers of ``math`` (``math.pi``; its functions work on Python numbers, not Triton values); an
  attribute of anything else is one of :func:`value_attributes`, the public attributes of Triton's
  tensors, dtypes and constexprs, without ``handle``, ``data``, ``base`` and ``type`` (the
  interpreter's host array and numpy objects);
- a call is of a name that is not a parameter or local (a function handed in as an argument), or of
  an attribute; nothing is called on the result of a call or an index;
- no item assignment (Triton's tensors have none: results go through ``tl.store``), no in-place
  update of a ``tl.constexpr`` parameter or a loop target;
- Python never does the arithmetic: ``int``/``float``/``bool`` take only constants (literals,
  ``tl.constexpr`` parameters, globals, ``x.shape[i]`` and arithmetic of those), and so do the entries
  of a list display (a shape, ``[BLOCK_M, BLOCK_N]``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import math
import types

from d2k_env.evaluator.triton_compat import (BLOCK_POINTERS_REMOVED, GPU_BINOPS, GPU_COMPARES, TRITON,
                                             gpu_unsupported_nodes)

# The builtins Triton's front end lets a kernel call.
BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs", "isinstance", "print", "tuple",
                      "zip", "enumerate", "True", "False", "None"})
FORBIDDEN = {
    ast.Import: "an import", ast.ImportFrom: "an import", ast.Global: "a global statement",
    ast.Nonlocal: "a nonlocal statement", ast.ClassDef: "a class", ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function", ast.Lambda: "a lambda", ast.Try: "a try statement",
    ast.With: "a with statement", ast.AsyncWith: "a with statement", ast.Raise: "a raise statement",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Await: "await",
    ast.Delete: "a del statement", ast.AsyncFor: "an async for", ast.NamedExpr: "an assignment expression",
    ast.Break: "break", ast.Continue: "continue", ast.Set: "a set display", ast.Dict: "a dict display",
}
if hasattr(ast, "TryStar"):
    FORBIDDEN[ast.TryStar] = "a try statement"
# The rest of what the GPU code generator has no visitor for (match, starred targets, ...).
UNSUPPORTED = gpu_unsupported_nodes()
# Attributes of Triton values that lead out of the language under the interpreter.
HOST_ATTRIBUTES = frozenset({"handle", "data", "base", "type"})
CONVERSIONS = frozenset({"int", "float", "bool"})
# Enums triton.language re-exports from its C++ extension, which kernels pass as options
# (tl.maximum(..., propagate_nan=tl.PropagateNan.ALL)).
FOREIGN_ENUMS = frozenset({"PropagateNan"})
# Globals the GPU compiler refuses to read in a body: plain Python values, not tl.constexpr.
PLAIN = (bool, int, float, str, bytes, tuple, type(None))


@functools.cache
def value_attributes() -> frozenset[str]:
    """The public attributes of Triton's tensor, dtype, constexpr and type classes, but :data:`HOST_ATTRIBUTES`."""
    import triton.language as tl

    samples = (tl.tensor(None, tl.block_type(tl.float32, [2])), tl.dtype("fp32"), tl.constexpr(1),
               tl.block_type(tl.float32, [2]), tl.pointer_type(tl.float32))
    names: set[str] = set()
    for sample in samples:  # class attributes and those each instance sets
        names |= {n for n in (*dir(type(sample)), *vars(sample)) if not n.startswith("_")}
    return frozenset(names - HOST_ATTRIBUTES)


def builtins_namespace() -> dict:
    """The ``__builtins__`` of a rebuilt kernel's globals: :data:`BUILTINS` and nothing else."""
    return {name: getattr(builtins, name) for name in BUILTINS if hasattr(builtins, name)}


def problems(node: ast.FunctionDef, namespace: dict, launched: bool = False) -> list[str]:
    """Why the kernel ``node`` (decorators removed) is not Triton's language, given the globals
    ``namespace`` it will run with; empty when it is. ``launched``: the kernel is launched, not only
    called by other kernels (then it may not return a value)."""
    where = f"kernel {node.name} (line {node.lineno})"
    return [f"{where}: line {line} {message}" for line, message in located(node, namespace, launched)]


def located(node: ast.FunctionDef, namespace: dict, launched: bool = False) -> list[tuple[int, str]]:
    """:func:`problems` as (line, what) pairs."""
    return _Check(node, namespace, launched).run()


class _Check:
    def __init__(self, node: ast.FunctionDef, namespace: dict, launched: bool):
        self.node, self.namespace, self.launched = node, namespace, launched
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        self.params = {a.arg for a in args}
        self.local = self.params | {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                    and isinstance(n.ctx, (ast.Store, ast.Del))}
        self.constexprs = {a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        self.loop_targets = {n.id for f in ast.walk(node) if isinstance(f, ast.For)
                             for n in ast.walk(f.target) if isinstance(n, ast.Name)}
        self.body = {id(n) for stmt in node.body for n in ast.walk(stmt)}
        self.found: list[tuple[int, str]] = []

    def refuse(self, child: ast.AST, message: str) -> None:
        self.found.append((getattr(child, "lineno", self.node.lineno), message))

    def run(self) -> list[tuple[int, str]]:
        parents = {c: p for p in ast.walk(self.node) for c in ast.iter_child_nodes(p)}
        for child in ast.walk(self.node):
            if child is not self.node:
                self.visit(child, parents[child])
        for stmt in self.node.body:
            self.flow(stmt, loop=False, in_with=False)
        return self.found

    # -- one node at a time ---------------------------------------------------------------------------
    def visit(self, child: ast.AST, parent: ast.AST) -> None:
        kind = type(child)
        if kind in FORBIDDEN:
            self.refuse(child, f"has {FORBIDDEN[kind]}, which is not part of Triton's language")
        elif kind in UNSUPPORTED and not (kind is ast.Starred and isinstance(parent, ast.Call)) and \
                not (kind is ast.FormattedValue and isinstance(parent, ast.JoinedStr)):
            self.refuse(child, f"has a {kind.__name__}, which Triton's GPU compiler has no visitor for")
        elif isinstance(child, ast.Name):
            self.name(child)
        elif isinstance(child, ast.Attribute):
            if child.attr.startswith("_"):
                self.refuse(child, f"reads the attribute {child.attr}")
            elif problem := self.attribute(child):
                self.refuse(child, f"has {problem}")
        elif isinstance(child, ast.Compare):
            if len(child.ops) > 1:
                self.refuse(child, "chains comparisons, which Triton's GPU compiler refuses: combine them with &")
            if bad := [type(op).__name__ for op in child.ops if type(op) not in GPU_COMPARES]:
                self.refuse(child, f"compares with {bad[0]}, which Triton's GPU compiler does not implement")
        elif isinstance(child, (ast.BinOp, ast.AugAssign)) and type(child.op) not in GPU_BINOPS:
            self.refuse(child, f"uses the operator {type(child.op).__name__}, which Triton's GPU compiler does "
                               "not implement (tl.dot multiplies matrices)")
        elif isinstance(child, ast.Assign) and (len(child.targets) > 1 or any(
                isinstance(n, ast.Starred) for t in child.targets for n in ast.walk(t))):
            self.refuse(child, "assigns to several or starred targets, which Triton's GPU compiler refuses")
        elif isinstance(child, ast.Subscript) and isinstance(child.ctx, (ast.Store, ast.Del)):
            self.refuse(child, "assigns to an item: Triton's tensors have none (write results with tl.store)")
        elif isinstance(child, ast.AugAssign) and isinstance(child.target, ast.Name) and \
                child.target.id in self.constexprs | self.loop_targets:
            self.refuse(child, f"updates {child.target.id} in place: a tl.constexpr parameter or a loop target")
        elif isinstance(child, ast.Call):
            self.call(child)
        elif isinstance(child, ast.List) and not all(self.constant(e) for e in child.elts):
            self.refuse(child, "has a list of values that are not constants: Python, not Triton, would hold them")
        elif isinstance(child, (ast.If, ast.IfExp)) and isinstance(child.test, ast.Constant) and \
                type(child.test.value) not in (bool, int, type(None)):
            self.refuse(child, f"tests a {type(child.test.value).__name__} constant, which Triton's GPU compiler "
                               "refuses")
        elif isinstance(child, ast.While) and (child.orelse or isinstance(child.test, ast.Constant)):
            self.refuse(child, "has a while loop with an else or a constant condition, which Triton's GPU compiler "
                               "refuses")
        elif isinstance(child, ast.For):
            self.loop(child)
        elif isinstance(child, ast.Return) and self.launched and child.value is not None and \
                not (isinstance(child.value, ast.Constant) and child.value.value is None):
            self.refuse(child, "returns a value from a launched kernel: only a device function called from "
                               "another kernel may")

    def name(self, child: ast.Name) -> None:
        if child.id.startswith("__"):
            self.refuse(child, f"uses the name {child.id}")
        elif not isinstance(child.ctx, ast.Load) or child.id in self.local | BUILTINS:
            return
        elif child.id not in self.namespace:
            self.refuse(child, f"reads {child.id}, which is neither a parameter, a local, a Triton module, "
                               "another kernel nor a constant of solution.py")
        elif id(child) in self.body and isinstance(self.namespace[child.id], PLAIN):
            # The signature's defaults are Python's, at definition; the body reads only what the compiler can.
            self.refuse(child, f"reads the module-level value {child.id}: Triton's GPU compiler reads only globals "
                               f"bound as {child.id} = tl.constexpr(...) (or pass it as an argument)")

    def attribute(self, node: ast.Attribute) -> str | None:
        """Why ``node`` (one attribute, read on its own or at the end of a chain) leaves the language."""
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        chain.reverse()
        module = self.module_of(root)
        if module is None:
            if node.attr not in value_attributes():
                return f"the attribute {node.attr}, which is not one of Triton's tensors, dtypes or constexprs"
            return None
        obj, path = module, root.id
        for i, attr in enumerate(chain):
            if i and chain[i - 1] in FOREIGN_ENUMS and all(isinstance(getattr(obj, a, None), obj) for a in chain[i:]):
                return None  # tl.PropagateNan.ALL
            if not isinstance(obj, types.ModuleType):
                # Past the module: what is left is an attribute of a Triton value (tl.float32.primitive_bitwidth).
                rest = [a for a in chain[i:] if a not in value_attributes()]
                return f"{'.'.join(chain)}, whose {rest[0]} is not an attribute of Triton's values" if rest else None
            if not _language_module(obj):
                return f"{path}, the module {obj.__name__}, outside Triton's language"
            obj, path = getattr(obj, attr, None), f"{path}.{attr}"
            if obj is None and attr == "advance" and TRITON >= BLOCK_POINTERS_REMOVED:
                return (f"{path}: Block pointers have been removed from Triton {'.'.join(map(str, TRITON))}: "
                        f"use tl.make_tensor_descriptor")
            if obj is None:
                return f"{path}, which does not exist"
        if isinstance(obj, types.ModuleType):
            return None if _language_module(obj) else f"{path}, outside Triton's language"
        owner = str(getattr(obj, "__module__", None) or type(obj).__module__)
        if chain[-1] in FOREIGN_ENUMS and isinstance(obj, type):
            return None
        if owner == "math" or (module is math and not isinstance(obj, (int, float))):
            return f"{path}: Python's math works on Python numbers, not Triton values (use tl.math or tl.*)"
        # The interpreter swaps the language's functions for its own (triton.runtime.interpreter's).
        if module is math or owner == "triton" or owner.startswith(("triton.language", "triton.runtime.interpreter")):
            return None
        return f"{path}, a {type(obj).__name__} of {owner}, outside Triton's language"

    def module_of(self, root: ast.AST) -> types.ModuleType | None:
        if isinstance(root, ast.Name) and root.id not in self.local and \
                isinstance(self.namespace.get(root.id), types.ModuleType):
            return self.namespace[root.id]
        return None

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in self.local:
                self.refuse(node, f"calls its argument or local {func.id}: a kernel calls Triton's functions, "
                                  "other kernels and a few builtins by name")
            elif func.id in CONVERSIONS and func.id not in self.namespace and \
                    not (len(node.args) == 1 and not node.keywords and self.constant(node.args[0])):
                self.refuse(node, f"has {func.id}(...) of a value that is not a constant: Python would do the "
                                  "arithmetic on the number it makes")
        elif not isinstance(func, ast.Attribute):
            self.refuse(node, "calls something other than a function by name or an attribute")

    def loop(self, node: ast.For) -> None:
        kind = self.iterator(node.iter)
        if kind is None:
            self.refuse(node, "loops over something other than range, tl.range or tl.static_range, which Triton's "
                              "GPU compiler refuses")
        elif not isinstance(node.target, ast.Name):
            self.refuse(node, "has a loop target that is not a single name")
        elif node.orelse and kind != "static_range":
            self.refuse(node, "has a for ... else, which Triton's GPU compiler refuses")

    def iterator(self, it: ast.AST) -> str | None:
        """``range``, ``static_range`` or ``tl_range`` for a call of one, else None."""
        if not isinstance(it, ast.Call):
            return None
        if isinstance(it.func, ast.Name):
            return "range" if it.func.id == "range" and "range" not in self.local | set(self.namespace) else None
        if isinstance(it.func, ast.Attribute) and self.module_of(it.func.value) is not None and \
                _language_module(self.module_of(it.func.value)):
            obj = getattr(self.module_of(it.func.value), it.func.attr, None)
            name = getattr(obj, "__name__", "")
            if name in ("range", "static_range") and str(getattr(obj, "__module__", "")).startswith("triton.language"):
                return "static_range" if name == "static_range" else "tl_range"
        return None

    def flow(self, node: ast.AST, loop: bool, in_with: bool) -> None:
        """``return`` inside a loop (but tl.static_range's, which is unrolled) or a ``with``."""
        if isinstance(node, ast.Return) and (loop or in_with):
            self.refuse(node, f"returns inside a {'loop' if loop else 'with block'}, which Triton's GPU compiler "
                              "refuses")
        unrolled = isinstance(node, ast.For) and self.iterator(node.iter) == "static_range"
        block = isinstance(node, (ast.For, ast.While, ast.With))
        for child in ast.iter_child_nodes(node):
            in_body = block and (child in node.body or child in getattr(node, "orelse", ()))
            self.flow(child, loop or (in_body and not isinstance(node, ast.With) and not unrolled),
                      in_with or (in_body and isinstance(node, ast.With)))

    def constant(self, node: ast.AST) -> bool:
        """A literal, a ``tl.constexpr`` parameter, a global, ``x.shape[i]``, a number of a module
        (``math.pi``, ``tl.float32``), or arithmetic of those: what Python may compute in a kernel."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.constexprs or (node.id not in self.local and node.id in self.namespace)
        if isinstance(node, ast.Attribute):
            module = self.module_of(node.value)
            return module is not None or (node.attr == "value" and self.constant(node.value))
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and \
                isinstance(node.slice, ast.Constant)
        if isinstance(node, ast.BinOp):
            return self.constant(node.left) and self.constant(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.constant(node.operand)
        if isinstance(node, ast.BoolOp):
            return all(self.constant(v) for v in node.values)
        return False


def _language_module(module: types.ModuleType) -> bool:
    name = module.__name__
    return name in ("triton", "math") or name == "triton.language" or name.startswith("triton.language.")
