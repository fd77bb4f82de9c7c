"""One text, checked and run: the layers of d2k_env/evaluator/source_text.py, one by one.

Python's tokenizer ends lines only at \\n, \\r\\n and a lone \\r; str.splitlines, which filled linecache,
also at \\x0b \\x0c \\x1c \\x1d \\x1e \\x85 \\u2028 \\u2029. Triton compiles a kernel from the text
inspect.getsourcelines finds in linecache at the code object's line number (the interpreter's
rewriter, and JITFunction.src on the GPU path), so with those characters above a kernel the text it
compiled was another one: s01-s03 put the string's contents there, a kernel body calling torch that
the policy had only seen as a string, and earned the full reward on all three tasks. s04 is the GPU
path's own variant: JITFunction cuts its source at the first ``def`` line, one in a decorator's
string included.

The exploits are tests/security/source_text/ (separator_comment_shift, line_separator_string_shift,
form_feed_page_breaks: s01-s03; def_in_decorator_string: s04), evaluated by tests/test_security.py.
The fix, three layers, each tested here on its own: the policy refuses those characters anywhere
([source-text]); the worker gives linecache the tokenizer's lines; and at load every kernel's
source as Triton will compile it (inspect's lines, JITFunction.src, the interpreter's rewritten
source) is compared with the text the policy checked ([source-text]). Kernels must be defined at
module level ([kernel-source]), so that every kernel exists when that comparison runs.
"""

from __future__ import annotations

import linecache
from pathlib import Path

import pytest

from d2k_env.task import load_task, task_ids

HERE = Path(__file__).parent / "security" / "source_text"
# Fixed by the worker's linecache: with the policy off, the checked kernel (it does nothing) runs.
LINE_TABLE = ["separator_comment_shift.py", "line_separator_string_shift.py", "form_feed_page_breaks.py"]

SEPARATORS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


# -- the layers one by one -------------------------------------------------------------------------------

def _rules(source: str) -> list[str]:
    from d2k_env.evaluator.policy import check_solution
    return [v.rule for v in check_solution(source, frozenset({"empty_like"}))]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s):04X}" for s in SEPARATORS])
@pytest.mark.parametrize("where", ["comment", "string", "docstring"])
def test_policy_refuses_separators_anywhere(sep, where):
    reference = load_task("fused_add_rmsnorm").reference_path.read_text()
    text = {"comment": reference.replace("import torch\n", f"import torch  # {sep}\n", 1),
            "string": reference.replace("EPS = 1e-6\n", f"EPS = 1e-6\nNOTE = 'a{sep}b'\n", 1),
            "docstring": reference.replace('"""Fused residual', f'"""Fused{sep} residual', 1)}[where]
    assert text != reference
    assert _rules(text) == ["source-text"]


def test_policy_refuses_a_lone_carriage_return_and_accepts_crlf():
    reference = load_task("fused_add_rmsnorm").reference_path.read_text()
    assert _rules(reference.replace("\n", "\r\n")) == []
    assert _rules(reference.replace("EPS = 1e-6\n", "EPS = 1e-6\rX = 1\n", 1)) == ["source-text"]


@pytest.mark.parametrize("sep", SEPARATORS + ["\r\n"], ids=[f"U+{ord(s[0]):04X}" for s in SEPARATORS] + ["CRLF"])
def test_tokenizer_lines_number_lines_as_the_compiler_does(sep):
    from d2k_env.evaluator.source_text import tokenizer_lines

    inside = "" if sep == "\r\n" else sep  # CRLF: as line ends only
    source = f"x = 1  # a{inside}b\ns = 'c{inside}d'\n\ndef f():\n    return 1\n".replace("\n", "\r\n" if sep == "\r\n" else "\n")
    code = compile(source, "t.py", "exec")
    fn = next(c for c in code.co_consts if hasattr(c, "co_firstlineno"))
    assert tokenizer_lines(source)[fn.co_firstlineno - 1].startswith("def f():")
    assert "".join(tokenizer_lines(source)) == source


def _load_as_before(path: str, source: str):
    """What the worker's load_module did before the fix: linecache filled with str.splitlines."""
    from types import ModuleType
    linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
    module = ModuleType("solution")
    module.__file__ = path
    exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    return module


def _both_kinds(module) -> list:
    """The module's kernels, plus a JITFunction (the GPU path) and an InterpretedFunction (the
    interpreter) made from each one's Python function, whichever kind this process's triton.jit made."""
    from triton.runtime import KernelInterface
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from d2k_env.evaluator.source_text import _layers
    made = []
    for obj in list(vars(module).values()):
        if isinstance(obj, KernelInterface):
            fn = _layers(obj)[-1]
            made += [JITFunction(fn), InterpretedFunction(fn)]
    return made


@pytest.mark.parametrize("name", LINE_TABLE)
def test_load_time_check_catches_the_old_line_table(name, tmp_path):
    """Without the policy rule and with linecache filled as before the fix, the comparison at load
    still refuses every kernel, on both paths."""
    from d2k_env.evaluator.source_text import kernel_source_problem

    source = (HERE / name).read_text()
    path = str(tmp_path / "solution.py")
    module = _load_as_before(path, source)
    for kernel in _both_kinds(module):
        problem = kernel_source_problem(source, path)
        assert problem and problem.startswith("[source-text]"), problem
        del kernel


@pytest.mark.parametrize("name", LINE_TABLE)
def test_load_module_gives_linecache_the_tokenizer_lines(name, tmp_path):
    import inspect

    from d2k_env.evaluator.source_text import kernel_source_problem, tokenizer_lines
    from d2k_env.evaluator.worker import load_module

    source = (HERE / name).read_text()
    path = str(tmp_path / "solution.py")
    module = load_module(path, "solution", source)
    assert linecache.getlines(path) == tokenizer_lines(source)
    kernels = _both_kinds(module)
    assert kernels
    fn = kernels[0].fn
    assert "pass" in inspect.getsource(fn) and "torch" not in inspect.getsource(fn)
    assert kernels[0].src.startswith("def ") and "torch" not in kernels[0].src
    assert kernel_source_problem(source, path) is None


def test_load_time_check_catches_a_def_in_a_decorator_string_on_the_gpu_path(tmp_path):
    from d2k_env.evaluator.source_text import kernel_source_problem
    from d2k_env.evaluator.worker import load_module

    source = (HERE / "def_in_decorator_string.py").read_text()
    path = str(tmp_path / "solution.py")
    module = load_module(path, "solution", source)
    jit, interpreted = _both_kinds(module)
    # What the GPU would compile: the string's function, which stores x as y (the real kernel is its string).
    assert jit.src.split("\n")[3].strip().startswith("tl.store(y_ptr + row + cols, tl.load(x_ptr"), jit.src
    problem = kernel_source_problem(source, path)
    assert problem and problem.startswith("[source-text]") and "JITFunction.src" in problem, problem


@pytest.mark.parametrize("task_id", task_ids())
def test_references_pass_the_load_time_check(task_id, tmp_path):
    from d2k_env.evaluator.source_text import kernel_source_problem
    from d2k_env.evaluator.worker import load_module

    source = load_task(task_id).reference_path.read_text()
    for text in (source, source.replace("\n", "\r\n")):
        path = str(tmp_path / f"solution{len(text)}.py")
        module = load_module(path, "solution", text)
        kernels = _both_kinds(module)
        assert kernels
        assert kernel_source_problem(text, path) is None


def test_kernels_must_be_defined_at_module_level():
    source = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n\n"
              "def forward(x):\n    y = torch.empty_like(x)\n    @triton.jit\n    def inner(p):\n        pass\n"
              "    inner[(1,)](y)\n    k[(1,)](y)\n    return y\n")
    assert "kernel-source" in _rules(source)
