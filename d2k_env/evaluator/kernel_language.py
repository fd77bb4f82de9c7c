"""Whether a kernel's source stays inside Triton's language: the check before a kernel is rebuilt.

The trusted replay (:mod:`d2k_env.evaluator.replay`) rebuilds each kernel from the source text the
policy checked and runs it: compiled by Triton's front end on the GPU, executed as Python by the
interpreter on the CPU. On the CPU that body *is* Python running in the trusted process, so it must
be nothing but the language: calls of ``tl`` functions and of other kernels, arithmetic, indexing and
control flow over its parameters and constants. This module says why a ``def`` is not.

Rules, each what Triton's GPU front end accepts (so an honest kernel never breaks one):

- no imports, classes, nested functions or lambdas, ``global``/``nonlocal``, ``try``/``with``/
  ``raise``, comprehensions, ``yield``/``await``, ``del``;
- no name or attribute that starts with an underscore (``__builtins__``, ``_semantic``, ...);
- a name is a parameter, a local, a global the recording supplies, or one of :data:`BUILTINS`;
- an attribute of a module reaches only Triton's language (``tl.*``, ``libdevice.*``, ``math.*``);
  an attribute of anything else is one of :data:`VALUE_ATTRIBUTES`, the public attributes of
  Triton's tensors, dtypes and constexprs, without ``handle`` (the interpreter's host array).
"""

from __future__ import annotations

import ast
import builtins
import functools
import types

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
}
if hasattr(ast, "TryStar"):
    FORBIDDEN[ast.TryStar] = "a try statement"


@functools.cache
def value_attributes() -> frozenset[str]:
    """The public attributes of Triton's tensor, dtype, constexpr and type classes (``handle`` aside)."""
    import triton.language as tl

    samples = (tl.tensor(None, tl.block_type(tl.float32, [2])), tl.dtype("fp32"), tl.constexpr(1),
               tl.block_type(tl.float32, [2]), tl.pointer_type(tl.float32))
    names: set[str] = set()
    for sample in samples:  # class attributes and those each instance sets
        names |= {n for n in (*dir(type(sample)), *vars(sample)) if not n.startswith("_")}
    return frozenset(names - {"handle"})


def builtins_namespace() -> dict:
    """The ``__builtins__`` of a rebuilt kernel's globals: :data:`BUILTINS` and nothing else."""
    return {name: getattr(builtins, name) for name in BUILTINS if hasattr(builtins, name)}


def problems(node: ast.FunctionDef, namespace: dict) -> list[str]:
    """Why the kernel ``node`` (decorators removed) is not Triton's language, given the globals
    ``namespace`` it will run with; empty when it is."""
    where = f"kernel {node.name} (line {node.lineno})"
    found: list[str] = []
    local = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
    local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    for child in ast.walk(node):
        if child is node:
            continue
        line = getattr(child, "lineno", node.lineno)
        what = FORBIDDEN.get(type(child))
        if what:
            found.append(f"{where}: line {line} has {what}, which is not part of Triton's language")
        elif isinstance(child, ast.Name):
            if child.id.startswith("__"):
                found.append(f"{where}: line {line} uses the name {child.id}")
            elif isinstance(child.ctx, ast.Load) and child.id not in local and child.id not in namespace and \
                    child.id not in BUILTINS:
                found.append(f"{where}: line {line} reads {child.id}, which is neither a parameter, a local, a "
                             f"Triton module, another kernel nor a constant of solution.py")
        elif isinstance(child, ast.Attribute):
            if child.attr.startswith("_"):
                found.append(f"{where}: line {line} reads the attribute {child.attr}")
            elif problem := _attribute_problem(child, namespace, local):
                found.append(f"{where}: line {line}: {problem}")
    return found


def _attribute_problem(node: ast.Attribute, namespace: dict, local: set[str]) -> str | None:
    """Why ``node`` (one attribute, read on its own or at the end of a chain) leaves the language."""
    chain, root = [node.attr], node.value
    while isinstance(root, ast.Attribute):
        chain.append(root.attr)
        root = root.value
    chain.reverse()
    if not (isinstance(root, ast.Name) and root.id not in local and
            isinstance(namespace.get(root.id), types.ModuleType)):
        if node.attr not in value_attributes():
            return f"the attribute {node.attr} is not one of Triton's tensors, dtypes or constexprs"
        return None
    # Rooted at a module: follow the chain through modules and the language's classes (tl.PropagateNan.ALL),
    # then what is left is attributes of a Triton value (tl.float32.primitive_bitwidth).
    obj, path = namespace[root.id], root.id
    for i, attr in enumerate(chain):
        if isinstance(obj, types.ModuleType):
            if not _language_module(obj):
                return f"{path} is the module {obj.__name__}, outside Triton's language"
        elif not isinstance(obj, type):
            rest = [a for a in chain[i:] if a not in value_attributes()]
            return f"{'.'.join([root.id, *chain])} reads {rest[0]}, which is not an attribute of Triton's values" \
                if rest else None
        if not hasattr(obj, attr):
            return f"{path}.{attr} does not exist"
        obj, path = getattr(obj, attr), f"{path}.{attr}"
    if isinstance(obj, types.ModuleType):
        return None if _language_module(obj) else f"{path} is outside Triton's language"
    owner = str(getattr(obj, "__module__", None) or type(obj).__module__)
    # The interpreter swaps the language's functions for its own (triton.runtime.interpreter's); the
    # language also exports a few of the compiler's enums (tl.PropagateNan).
    if owner in ("math", "triton") or owner.startswith(("triton.language", "triton.runtime.interpreter",
                                                         "triton._C.libtriton")):
        return None
    return f"{path} is a {type(obj).__name__} of {owner}, outside Triton's language"


def _language_module(module: types.ModuleType) -> bool:
    name = module.__name__
    return name in ("triton", "math") or name == "triton.language" or name.startswith("triton.language.")

