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

Two defences here, each sufficient for the case above; and the trusted replay runs no text of the
file at all: it compiles ``ast.unparse`` of the checked syntax trees and gives ``linecache`` that
text, so what Triton re-reads is what was checked:

- :func:`text_problems`: the policy refuses those characters anywhere in a solution, and a lone
  ``\\r`` (``[source-text]``). Anywhere, not only outside string literals: honest code never needs
  one raw (a string that wants one writes its escape, ``"\\x0c"``), and a rule that needs no
  tokenizer cannot disagree with one.
- :func:`tokenizer_lines`: the workers give ``linecache`` exactly the tokenizer's lines.
"""

from __future__ import annotations

import re

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
