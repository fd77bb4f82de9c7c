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
The fix, in layers, each tested here on its own: the policy refuses those characters anywhere
([source-text]); the workers give linecache the tokenizer's lines; and the trusted replay rebuilds
every kernel from the checked text's own syntax tree, so the text Triton re-reads is the function
checked. Kernels must be defined at module level ([kernel-source]): only those are rebuilt.
"""

from __future__ import annotations

import linecache
from pathlib import Path

import pytest

from d2k_env.task import load_task

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


def _kernels_of(source: str) -> dict:
    """A recording's kernel table naming every decorated top-level function of ``source`` (what a
    recording of it would name), reading only Triton's modules."""
    import ast

    from d2k_env.evaluator.recording import Kernel

    modules = {"tl": {"module": "triton.language"}, "triton": {"module": "triton"}}
    return {f"{n.name}:{n.decorator_list[0].lineno}": Kernel(n.name, n.decorator_list[0].lineno, {}, modules)
            for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.decorator_list}


@pytest.mark.parametrize("name", LINE_TABLE + ["def_in_decorator_string.py"])
def test_replay_compiles_the_checked_text(name, tmp_path):
    """With the policy off, the trusted replay rebuilds each kernel from the checked text's own syntax
    tree, and what Triton then reads of it (inspect's lines: the GPU path's JITFunction.src and the
    interpreter's rewriter both start there) is that function, never a string's contents."""
    import ast
    import inspect
    import textwrap

    from d2k_env.evaluator.recording import Recording
    from d2k_env.evaluator.replay import ReplayError, rebuild_kernels

    source = (HERE / name).read_text()
    path = str(tmp_path / "solution.py")
    kernels = _kernels_of(source)
    assert kernels
    try:
        jitted = rebuild_kernels(source, path, Recording((), (), (), kernels))
    except ReplayError as exc:  # a kernel outside the language is refused before anything runs
        assert "torch" in str(exc), exc
        return
    checked = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    for jit in jitted.values():
        read = ast.parse(textwrap.dedent(inspect.getsource(jit.fn))).body[0]
        node = checked[jit.fn.__name__]
        assert [ast.dump(n) for n in read.body] == [ast.dump(n) for n in node.body] and "torch" not in ast.dump(read)


@pytest.mark.parametrize("task_id", ["fused_add_rmsnorm", "merge_attn_states", "per_token_group_quant_fp8"])
def test_references_rebuild_from_their_text(task_id, tmp_path):
    """References whose kernels read only Triton's modules, rebuilt by the replay from LF and CRLF copies
    of their text (every reference is rebuilt from its recording by every evaluation of it)."""
    from d2k_env.evaluator.recording import Recording
    from d2k_env.evaluator.replay import rebuild_kernels

    source = load_task(task_id).reference_path.read_text()
    for text in (source, source.replace("\n", "\r\n")):
        path = str(tmp_path / f"solution{len(text)}.py")
        assert rebuild_kernels(text, path, Recording((), (), (), _kernels_of(text)))


def test_kernels_must_be_defined_at_module_level():
    source = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(p):\n    pass\n\n"
              "def forward(x):\n    y = torch.empty_like(x)\n    @triton.jit\n    def inner(p):\n        pass\n"
              "    inner[(1,)](y)\n    k[(1,)](y)\n    return y\n")
    assert "kernel-source" in _rules(source)
