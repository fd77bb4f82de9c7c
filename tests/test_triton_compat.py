"""The evaluator under every supported Triton: what it reads off Triton is listed and gated by release.

d2k_env/evaluator/triton_compat.py holds the supported range, the fixed tables the policy and the interpreter
patch use in place of Triton's own (the GPU code generator's language, the methods of Triton's values, a
kernel object's API) and the list of Triton internals the evaluator touches, each with the releases that
have it. These tests fail when the installed Triton disagrees with any of it, so a new release is looked at
before it is allowed, and when code touches a private Triton name the list lacks.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from d2k_env.evaluator import triton_compat
from d2k_env.evaluator.triton_compat import (GPU_BINOPS, GPU_BUILTINS, GPU_COMPARES, GPU_VISITED_NODES,
                                             KERNEL_OBJECT_API, NEWEST_SUPPORTED, OLDEST_SUPPORTED, TRITON,
                                             TRITON_INTERNALS, TRITON_METHODS, TRITON_METHODS_LEFT_OUT, in_range,
                                             parse_version)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "d2k_env"


def test_versions_parse():
    assert parse_version("3.6.0") == (3, 6, 0)
    assert parse_version("3.9.0+git1a2b3c4") == (3, 9, 0)
    assert parse_version("3.8.0rc1") == (3, 8, 0)
    assert parse_version("3.10") == (3, 10, 0)
    with pytest.raises(ValueError):
        parse_version("main")


def test_the_installed_triton_is_supported_and_pyproject_agrees():
    assert triton_compat.supported(), f"Triton {triton.__version__} is outside the tested range"
    text = (ROOT / "pyproject.toml").read_text()
    spec = re.search(r'"triton>=(\d+)\.(\d+),<(\d+)\.(\d+)', text)
    assert spec, "pyproject.toml gives Triton no >=x.y,<x.z range"
    low, high = (int(spec[1]), int(spec[2])), (int(spec[3]), int(spec[4]))
    assert low == OLDEST_SUPPORTED and high == (NEWEST_SUPPORTED[0], NEWEST_SUPPORTED[1] + 1), (low, high)


# Resolves each TRITON_INTERNALS name in a fresh process (no patch applied: apply() adds get_bf16).
RESOLVE = """
import importlib, inspect, json, sys
out = {}
for entry in json.loads(sys.argv[1]):
    module, _, path = entry.partition(":")
    obj = importlib.import_module(module)
    *owners, last = path.replace("#", ".").split(".")
    try:
        for part in owners:
            obj = getattr(obj, part)
    except AttributeError:
        out[entry] = False
        continue
    if "#" in path:  # an instance attribute: set in the class's own __init__ (or a base's)
        out[entry] = any(f"self.{last} =" in inspect.getsource(cls.__init__) for cls in obj.__mro__
                         if "__init__" in vars(cls))
    else:
        out[entry] = hasattr(obj, last)
print(json.dumps(out))
"""


def test_internals_exist_exactly_in_their_listed_releases():
    done = subprocess.run([sys.executable, "-c", RESOLVE, json.dumps(list(TRITON_INTERNALS))], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    wrong = {name: f"listed for {span}, {'present' if found[name] else 'absent'} in {triton.__version__}"
             for name, span in TRITON_INTERNALS.items() if found[name] != in_range(TRITON, span)}
    assert not wrong, wrong


def _triton_names(tree: ast.Module) -> set[str]:
    """Names a module binds to Triton modules or objects: its triton imports, anything assigned from them
    (``Builder = interpreter.InterpreterBuilder``), and the parameters that hold an autotuner or rewriter."""
    names = {"tuner", "rewriter"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "triton"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            names |= {a.asname or a.name for a in node.names}
    grew = True
    while grew:
        grew = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                root = node.value
                while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                    root = root.func if isinstance(root, ast.Call) else root.value
                if isinstance(root, ast.Name) and root.id in names and node.targets[0].id not in names:
                    names.add(node.targets[0].id)
                    grew = True
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("_d2k_") and not (name.startswith("__") and name.endswith("__"))


def _private_touches(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = _triton_names(tree)
    touched = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in names:
                touched.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            touched |= {a.name for a in node.names if _private(a.name)}
            touched |= {part for part in node.module.split(".") if _private(part)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2 and \
                isinstance(node.args[0], ast.Name) and node.args[0].id in names and \
                isinstance(node.args[1], ast.Constant) and _private(str(node.args[1].value)):
            touched.add(node.args[1].value)
    return touched


def test_no_private_triton_name_is_touched_without_being_listed():
    listed = {re.split(r"[.:#]", name)[-1] for name in TRITON_INTERNALS} | {"_C"}
    unlisted = {str(path.relative_to(ROOT)): sorted(_private_touches(path) - listed)
                for path in sorted(PACKAGE.rglob("*.py"))}
    unlisted = {path: names for path, names in unlisted.items() if names}
    assert not unlisted, f"private Triton names used but not in triton_compat.TRITON_INTERNALS: {unlisted}"


def test_the_scan_sees_the_touches_it_is_for():
    # The check above is syntactic: make sure it still finds what the interpreter patch and guards touch.
    touched = _private_touches(PACKAGE / "evaluator" / "interpreter_patch.py")
    assert {"_interpreter", "_find_def", "_init_args_hst", "_patch_lang_core", "_get_np_dtype"} <= touched
    assert {"_bench", "_do_bench"} <= _private_touches(PACKAGE / "evaluator" / "guards.py")


# --- The fixed tables against the installed Triton's own ---------------------------------------------------

# Node types a later release's code generator visits that 3.6's does not (the policy keeps refusing them).
VISITED_FROM = {"NamedExpr": (3, 8)}


def _code_generator():
    from triton.compiler.code_generator import CodeGenerator
    return CodeGenerator


def test_the_code_generator_visits_what_the_policy_expects():
    nodes = {c.__name__ for c in vars(ast).values() if isinstance(c, type) and issubclass(c, (ast.stmt, ast.expr))}
    visited = {n[len("visit_"):] for n in dir(_code_generator()) if n.startswith("visit_")} & nodes
    expected = (GPU_VISITED_NODES & nodes) | {n for n, first in VISITED_FROM.items() if TRITON >= first}
    assert visited == expected, (sorted(visited - expected), sorted(expected - visited))


def test_the_code_generator_has_the_operators_the_policy_expects():
    generator = _code_generator()
    if TRITON < (3, 9):
        binops, compares = set(generator._method_name_for_bin_op), set(generator._method_name_for_comp_op)
    else:  # 3.9 merged both tables (and and/or) into _operators
        binops = {op for op in generator._operators if issubclass(op, ast.operator)}
        compares = {op for op in generator._operators if issubclass(op, ast.cmpop)}
    assert binops == GPU_BINOPS
    assert compares | {ast.Is, ast.IsNot} == GPU_COMPARES  # is / is not: answered by visit_Compare itself
    assert set(generator.builtin_namespace) == GPU_BUILTINS


def _public_names(*classes) -> set[str]:
    return {n for c in classes for n in dir(c) if not n.startswith("_")}


def test_the_methods_of_tritons_values_are_those_listed():
    import triton.language as tl

    installed = _public_names(tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr, tl.tuple,
                              tl.tensor_descriptor, tl.core.tensor_descriptor_base)
    left_out = set().union(*(names for first, names in TRITON_METHODS_LEFT_OUT.items() if TRITON >= first))
    assert TRITON_METHODS <= installed, sorted(TRITON_METHODS - installed)
    assert installed - TRITON_METHODS == left_out, sorted(installed - TRITON_METHODS - left_out)


def test_a_kernel_objects_api_is_all_listed():
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    installed = {n for c in (JITFunction, Autotuner, Heuristics) for n in dir(c)
                 if not (n.startswith("__") and n.endswith("__"))}
    assert installed <= KERNEL_OBJECT_API, sorted(installed - KERNEL_OBJECT_API)


# --- Verdicts that once depended on the Triton installed ----------------------------------------------------

def test_an_autotune_hook_is_refused_whatever_the_triton(tmp_path):
    """From Triton 3.8 a tuner left with one config skips _bench, where the hooks were refused; on the
    interpreter (one config kept) a post_hook passed under 3.8 and 3.9. Refused under every Triton."""
    from d2k_env.evaluator import Evaluator
    from d2k_env.task import load_task
    from d2k_env.verdict import format_result

    task = load_task("fused_add_rmsnorm")
    source = task.reference_path.read_text()
    source = source.replace("@triton.jit\ndef _rmsnorm_two_pass", "def _hook(*args, **kwargs):\n    pass\n\n\n"
                            "@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)],"
                            " key=['N'], post_hook=_hook)\n@triton.jit\ndef _rmsnorm_two_pass", 1)
    source = source.replace(", num_warps=num_warps)", ")")
    assert "post_hook=_hook" in source and "num_warps=num_warps)" not in source
    path = tmp_path / "solution.py"
    path.write_text(source)
    ev = Evaluator(task, "interpreter")
    try:
        result = ev.evaluate(path, "submit", workloads=[ev.workloads[0].name])
    finally:
        ev.close()
    assert not result.correct and "[launch-args] autotune pre_hook, post_hook" in format_result(result), \
        format_result(result)
