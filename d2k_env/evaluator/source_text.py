"""One text, checked and run: the source the policy checks is the source Triton compiles.

Python's compiler numbers lines by its tokenizer, which ends a line only at ``\\n``, ``\\r\\n`` or a
lone ``\\r``. ``str.splitlines`` (and so every line table built with it: ``linecache`` as the worker
used to fill it, the policy's own line list) also ends lines at ``\\x0b``, ``\\x0c``, ``\\x1c``,
``\\x1d``, ``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``, characters the tokenizer keeps inside a
line (in a comment or a string; ``\\x0c`` also as whitespace). Triton does not compile a kernel from
the code object Python made: it re-reads the kernel's text through ``inspect.getsourcelines``, that
is ``linecache`` at the code object's first line number (the interpreter's ``FunctionRewriter``, and
``JITFunction.src``, which the GPU path compiles). With one table shifted against the other, the
text at that line number was another one, a string's contents say, that the policy had read as a
string: a kernel body the policy never checked ran (torch operators, imports, anything).

Three defences, each sufficient for the case above:

- :func:`text_problems`: the policy refuses those characters anywhere in a solution, and a lone
  ``\\r`` (``[source-text]``). Anywhere, not only outside string literals: honest code never needs
  one raw (a string that wants one writes its escape, ``"\\x0c"``), and a rule that needs no
  tokenizer cannot disagree with one.
- :func:`tokenizer_lines`: the worker gives ``linecache`` exactly the tokenizer's lines.
- :func:`kernel_source_problem`: after the solution loads, every Triton kernel made from its file is
  compared with the text the policy checked for that function: the lines ``inspect`` returns, the
  ``JITFunction.src`` the GPU path compiles (on the interpreter too, as the GPU would take it), and
  the source the interpreter's rewriter will run. A mismatch fails the evaluation with
  ``[source-text]`` before any kernel runs.
"""

from __future__ import annotations

import ast
import gc
import inspect
import re
import textwrap
from pathlib import Path

# Characters str.splitlines ends a line at and Python's tokenizer does not (lone \r aside: both end a
# line there, but re's ^ and textwrap.dedent, which Triton cuts kernel sources with, do not).
SEPARATORS = {
    "\x0b": "a vertical tab (\\x0b)",
    "\x0c": "a form feed (\\x0c)",
    "\x1c": "a file separator (\\x1c)",
    "\x1d": "a group separator (\\x1d)",
    "\x1e": "a record separator (\\x1e)",
    "\x85": "a next-line character (\\x85)",
    "\u2028": "a line separator (\\u2028)",
    "\u2029": "a paragraph separator (\\u2029)",
}
_LINE_END = re.compile(r"\r\n|\r|\n")
_SUSPECT = re.compile("[" + "".join(SEPARATORS) + r"]|\r(?!\n)")
MAX_REPORTED = 5


def tokenizer_lines(source: str) -> list[str]:
    """``source`` cut where Python's tokenizer ends lines (``\\n``, ``\\r\\n``, a lone ``\\r``), each line
    keeping its end: line n of this list is line n of every code object compiled from ``source``."""
    lines, start = [], 0
    for m in _LINE_END.finditer(source):
        lines.append(source[start:m.end()])
        start = m.end()
    if start < len(source):
        lines.append(source[start:])
    return lines


def text_problems(source: str) -> list[tuple[int, str]]:
    """(line, message) for each line (at most MAX_REPORTED) holding characters that other line splitters
    treat differently from Python's tokenizer, wherever they stand: code, comment or string."""
    found: dict[int, list[str]] = {}
    for m in _SUSPECT.finditer(source):
        line = len(_LINE_END.findall(source, 0, m.start())) + 1
        if line not in found and len(found) == MAX_REPORTED:
            break
        found.setdefault(line, []).append(SEPARATORS.get(m.group(), "a carriage return not followed by a line "
                                                                    "feed (\\r)"))
    return [(line, f"the line holds {_count(kinds)}, where Python's tokenizer and the line splitters Triton reads "
                   "kernels through (str.splitlines, linecache, re, textwrap) disagree on where lines end, so the "
                   "kernel text Triton compiles would not be the text checked; write such a character as an "
                   "escape in a string, and end lines with \\n")
            for line, kinds in found.items()]


def _count(kinds: list[str]) -> str:
    names = list(dict.fromkeys(kinds))
    return (names[0] if len(kinds) == 1 else f"{len(kinds)} such characters ({', '.join(names)})")


def checked_functions(source: str) -> dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[str]]]:
    """For each function in ``source``: its first line (the first decorator's, as in its code object's
    co_firstlineno) -> (its node, its lines as the tokenizer cut them, decorators through its last line)."""
    lines = tokenizer_lines(source)
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[first] = (node, lines[first - 1:node.end_lineno])
    return out


def _newline_lines(text: str) -> list[str]:
    """Lines as re's ^ and textwrap.dedent see them: cut at \\n only."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _from_line(text: str, index: int) -> str:
    return "".join(_newline_lines(text)[index:])


def _layers(obj) -> list:
    """A Triton kernel object and what it wraps (Autotuner -> Heuristics -> JITFunction), down to the
    Python function at the bottom (the last element)."""
    from triton.runtime import KernelInterface
    from triton.runtime.jit import JITCallable

    layers = [obj]
    while isinstance(layers[-1], (KernelInterface, JITCallable)) and len(layers) < 16:
        layers.append(getattr(layers[-1], "fn", None))
    return layers


def _kernel_objects(path: str) -> list:
    """Every Triton kernel object alive whose Python function comes from the file ``path`` (found through
    the garbage collector, so wherever the module keeps it: globals, containers, defaults, partials)."""
    from triton.runtime import KernelInterface
    from triton.runtime.jit import JITCallable

    found, kinds = [], (KernelInterface, JITCallable)
    for obj in gc.get_objects():
        if issubclass(type(obj), kinds):  # not isinstance: a __class__ property could run (and warn)
            fn = _layers(obj)[-1]
            code = getattr(fn, "__code__", None)
            if code is not None and code.co_filename == path:
                found.append(obj)
    return found


def _verdict(name: str, first: int, what: str) -> str:
    return (f"[source-text] the source Triton would compile for kernel {name!r} (line {first}) {what}: it is not "
            "the text the policy checked, so the kernel may not run")


def kernel_source_problem(source: str | None, path: str) -> str | None:
    """Why some kernel made from ``path`` would be compiled from a text other than the one the policy
    checked in ``source`` (default: the file's text), or None. Call it after the solution has loaded,
    before any kernel runs."""
    checked = checked_functions(Path(path).read_text() if source is None else source)
    for obj in _kernel_objects(path):
        layers = _layers(obj)
        fn = layers[-1]
        first = fn.__code__.co_firstlineno
        entry = checked.get(first)
        if entry is None or entry[0].name != fn.__name__:
            return _verdict(fn.__name__, first, "belongs to no function of the checked source at that line")
        node, block = entry
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            return _verdict(fn.__name__, first, f"cannot be read ({exc})")
        # inspect's block may run past the function's last line into comment lines indented like its body.
        tail = lines[len(block):]
        if start != first or lines[:len(block)] != block or any(
                t.strip() and not t.lstrip().startswith("#") for t in tail):
            return _verdict(fn.__name__, first, "is not the function's own lines (inspect.getsourcelines reads "
                                                "other text at its line number)")
        dedented = textwrap.dedent("".join(lines))
        def_index = node.lineno - first
        for layer in layers[:-1]:
            problem = _layer_problem(layer, lines, dedented, def_index)
            if problem:
                return _verdict(fn.__name__, first, problem)
    return None


def _layer_problem(layer, lines: list[str], dedented: str, def_index: int) -> str | None:
    """What one kernel object compiles, against the checked lines: a JITFunction's ``src`` (the GPU path
    parses and compiles exactly that), or the source the interpreter's rewriter will run."""
    from triton.runtime.jit import JITCallable

    if isinstance(layer, JITCallable):
        if layer.src != _from_line(dedented, def_index):
            return "differs in JITFunction.src (what the GPU compiler takes)"
        if layer.raw_src != lines:
            return "differs in JITFunction.raw_src"
        return None
    rewriter = getattr(layer, "rewriter", None)
    if rewriter is None:  # Autotuner, Heuristics: their .fn is checked as the next layer
        return None
    # The interpreter runs its own cut of the text; the GPU would compile JITFunction's. Both must be the
    # checked one: a kernel the GPU would compile from other text is not paid for on the CPU either.
    from triton.runtime.jit import JITFunction
    try:
        gpu_src = JITFunction(layer.fn).src
    except Exception as exc:  # noqa: BLE001 - no GPU could compile it either
        return f"cannot be taken as the GPU path takes it ({type(exc).__name__}: {exc})"[:300]
    if gpu_src != _from_line(dedented, def_index):
        return "differs in JITFunction.src (what the GPU compiler would take)"
    def_lineno = rewriter._find_def(lines)
    if def_lineno != def_index + 1:
        return f"starts at line {def_lineno} of its source under the interpreter, not at its def"
    had = "def_lineno" in vars(rewriter)
    saved = vars(rewriter).get("def_lineno")
    rewriter.def_lineno = def_lineno
    try:
        prepared = rewriter._prepare_source(lines)
    finally:
        if had:
            rewriter.def_lineno = saved
        else:
            del rewriter.def_lineno
    if prepared != textwrap.dedent("".join(lines[def_index:])):
        return "differs in the source the interpreter would run"
    return None
