"""Finding the one tool call in an agent's reply text.

The rules, the same for every way of writing a call:

1. Reasoning is never read for calls. Every ``<think>...</think>`` block (also ``<thinking>`` and
   ``<reasoning>``) is skipped. A closing tag with no opening one before it ends reasoning that
   began with the reply (chat templates that open the block in the prompt return only the closing
   tag). An opening tag that is never closed makes the rest of the reply reasoning: no call is
   found there, and the message says the block was never closed. Tags inside a JSON value that
   parses (the content of a file being written, say) are data, not reasoning.
2. A reply that is, reasoning aside, one JSON value is read as the call itself.
3. Otherwise a call is looked for in ``<tool_call>...</tool_call>`` blocks, fenced blocks (```json,
   ```tool_call or unlabelled) and bare JSON objects outside every block (code in a ```python
   block holds no calls). A block or object
   counts as a call when it is a JSON object with ``"tool"`` (``{"tool", "args"}``) or ``"name"``
   (``{"name", "arguments"}``, function-call style); other JSON is left alone as data. A fenced or
   ``<tool_call>`` block that starts with ``{``, or a bare ``{"tool"``/``{"name"``, that is not
   valid JSON is a malformed call.
4. One reply is one step, so it must hold exactly one call. With more than one (malformed ones
   included) none runs and the step says which were found and where; a malformed call alone is
   reported with where it is in the reply and the line, column and expectation of the JSON error
   within the block.

Line numbers in messages count from 1 in the reply as sent, reasoning included.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable

_REASONING = re.compile(r"<(/?)(think|thinking|reasoning)>", re.IGNORECASE)
_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
_CALL_START = re.compile(r'\{\s*"(?:tool|name)"\s*:')
_MAX_OBJECT_STARTS = 200  # '{' positions tried when looking for JSON objects outside blocks
_MAX_LISTED = 5  # calls a refusal names one by one


class ReplyError(ValueError):
    """No single call could be read from the reply; the message says why, for the agent."""


@dataclass(frozen=True)
class Candidate:
    """A place in the reply that holds, or tried to hold, a call."""

    kind: str  # how it was written, e.g. "```json block"
    line: int  # where it starts in the reply
    call: dict[str, Any] | None  # {"tool", "args"} when it parsed, else None
    error: str = ""  # what is wrong when it did not

    def describe(self) -> str:
        what = f"a call of {self.call['tool']!r}" if self.call else "a malformed call"
        return f"{what} in the {self.kind} on line {self.line}"


def mask_reasoning(text: str) -> tuple[str, bool]:
    """``text`` with its reasoning blanked out (newlines kept, so offsets and line numbers stay), and
    whether a reasoning block was left unclosed. Tags inside JSON values that parse (a file's
    content in a call, say) are data, not reasoning."""
    in_json = _Spans(_json_spans(text))
    tags = [t for t in _REASONING.finditer(text) if in_json.holding(t.start()) is None]
    spans, start = [], None
    if tags and tags[0].group(1):
        start = 0  # a closing tag first: the reply began inside reasoning
    for tag in tags:
        if not tag.group(1) and start is None:
            start = tag.start()
        elif tag.group(1) and start is not None:
            spans.append((start, tag.end()))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    out, last = [], 0
    for a, b in spans:
        out += [text[last:a], re.sub(r"[^\n]", " ", text[a:b])]
        last = b
    out.append(text[last:])
    return "".join(out), start is not None


class _Spans:
    """Sorted, disjoint ``(start, end)`` spans, and which one holds a position."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = spans
        self._starts = [a for a, _ in spans]

    def holding(self, position: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(self._starts, position) - 1
        return self.spans[i] if i >= 0 and position < self.spans[i][1] else None


def _json_spans(text: str) -> list[tuple[int, int]]:
    """Where the JSON objects of ``text`` that parse lie, outermost ones only: one try at each ``{``
    not inside an object already read (at most :data:`_MAX_OBJECT_STARTS`)."""
    found, position = [], 0
    decoder = json.JSONDecoder()
    for _ in range(_MAX_OBJECT_STARTS):
        start = text.find("{", position)
        if start < 0:
            break
        try:
            _, position = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            position = start + 1
            continue
        found.append((start, position))
    return found


def as_call(value: Any) -> dict[str, Any] | None:
    """A parsed JSON value as ``{"tool": name, "args": ...}`` when it is shaped like a call (the env's
    own form, or ``{"name", "arguments"|"parameters"}``); None otherwise. Arguments given as a JSON
    string are parsed; a string that is not JSON stays, and the tool's validation refuses it."""
    if not isinstance(value, dict):
        return None
    if "tool" in value:
        return value
    if isinstance(value.get("name"), str):
        args = value.get("arguments", value.get("parameters"))
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError):
                pass
        return {"tool": value["name"], "args": {} if args is None else args}
    return None


def read_call(text: str, object_pairs_hook: Callable | None = None, format_note: str = "") -> Any:
    """The one call in ``text`` (see the module docstring): the JSON value of a reply that is one,
    else ``{"tool", "args"}`` found in a block or bare object. :class:`ReplyError` otherwise.
    ``object_pairs_hook`` builds every JSON object (as for ``json.loads``); ``format_note`` ends
    every message (how to write a call)."""
    decoder = json.JSONDecoder(object_pairs_hook=object_pairs_hook)
    try:  # one JSON value: nothing outside it can be reasoning (tags inside it are data)
        value = decoder.decode(text)
    except (ValueError, RecursionError):
        pass
    else:
        return as_call(value) or value  # not a call: the caller says what a call needs
    masked, unclosed = mask_reasoning(text)
    try:
        value = decoder.decode(masked)
    except (ValueError, RecursionError) as exc:
        whole_error = exc
    else:
        return as_call(value) or value
    candidates = find_candidates(masked, decoder)
    calls = [c for c in candidates if c.call is not None]
    if len(candidates) == 1 and calls:
        return calls[0].call
    if len(candidates) > 1:
        listed = "; ".join(c.describe() for c in candidates[:_MAX_LISTED])
        more = f"; and {len(candidates) - _MAX_LISTED} more" if len(candidates) > _MAX_LISTED else ""
        raise ReplyError(f"the reply holds {len(candidates)} calls ({listed}{more}); one reply is one step: send "
                         f"exactly one call. None of them ran. {format_note}")
    if candidates:
        raise ReplyError(f"the {candidates[0].kind} on line {candidates[0].line} of the reply is not valid JSON: "
                         f"{candidates[0].error}. {format_note}")
    if unclosed:
        raise ReplyError("no call found: a reasoning block (<think>) is never closed, so everything after it is "
                         f"reasoning, which is not read for calls; close it with </think> before the call. {format_note}")
    raise ReplyError(f"the action is not valid JSON ({_first_line(whole_error)}) and holds no tool call. {format_note}")


def find_candidates(masked: str, decoder: json.JSONDecoder) -> list[Candidate]:
    """Every call or malformed call in the (reasoning-masked) reply, in order of position."""
    lines = _LineIndex(masked)
    found: list[tuple[int, Candidate]] = []
    blocks = sorted(_hermes_blocks(masked) + [
        (m.start(), m.end(), f"```{m.group(1)} block" if m.group(1) else "fenced block", m.group(2),
         m.group(1).lower() in ("", "json", "tool_call")) for m in _FENCED.finditer(masked)])
    taken: list[tuple[int, int]] = []  # code in any block, ```python too, holds no bare calls
    for start, end, kind, body, may_hold_call in blocks:
        if taken and start < taken[-1][1]:
            continue  # a fence inside a <tool_call> block: counted once
        taken.append((start, end))
        if not may_hold_call or not body.strip().startswith("{"):
            continue  # code or prose, not a call
        try:
            value = decoder.decode(body)
        except (ValueError, RecursionError) as exc:
            found.append((start, Candidate(kind, lines.of(start), None, _where(exc, body))))
            continue
        call = as_call(value)
        if call is not None:
            found.append((start, Candidate(kind, lines.of(start), call)))
    found += _bare_objects(masked, _Spans(taken), decoder, lines)
    return [c for _, c in sorted(found, key=lambda pair: pair[0])]


def _hermes_blocks(text: str) -> list[tuple[int, int, str, str, bool]]:
    """The ``<tool_call>...</tool_call>`` blocks, found in one pass (a regex would rescan the rest of
    the text for every opening tag without a closing one)."""
    blocks, position = [], 0
    while (start := text.find("<tool_call>", position)) >= 0:
        close = text.find("</tool_call>", start)
        if close < 0:
            break
        end = close + len("</tool_call>")
        blocks.append((start, end, "<tool_call> block", text[start + len("<tool_call>"):close].strip(), True))
        position = end
    return blocks


def _bare_objects(masked: str, taken: _Spans, decoder: json.JSONDecoder, lines: "_LineIndex"):
    """Calls, and malformed ones that start like a call, among the JSON objects outside blocks."""
    position = 0
    for _ in range(_MAX_OBJECT_STARTS):
        start = masked.find("{", position)
        while start >= 0 and (span := taken.holding(start)) is not None:  # inside a block: go on after it
            start = masked.find("{", span[1])
        if start < 0:
            return
        try:
            value, position = decoder.raw_decode(masked, start)
        except (ValueError, RecursionError) as exc:
            position = start + 1
            if _CALL_START.match(masked, start):
                yield start, Candidate("bare JSON object", lines.of(start), None, _where(exc, masked, offset=start))
                position = _line_end(masked, start)
            continue
        call = as_call(value)  # what a JSON value holds is its own: the search goes on after it
        if call is not None:
            yield start, Candidate("bare JSON object", lines.of(start), call)


def _where(exc: Exception, text: str, offset: int = 0) -> str:
    """A JSON error as "what was expected, at line L, column C of its content" (counted from the
    block's first character, or from ``offset`` in ``text``)."""
    if not isinstance(exc, json.JSONDecodeError):
        return _first_line(exc)
    line = text.count("\n", offset, exc.pos) + 1
    column = exc.pos - (text.rfind("\n", offset, exc.pos) + 1 if line > 1 else offset) + 1
    return f"{exc.msg} at line {line}, column {column} of its content"


class _LineIndex:
    """Line numbers (from 1) of positions in a text."""

    def __init__(self, text: str):
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def of(self, position: int) -> int:
        return bisect.bisect_right(self._starts, position)


def _line_end(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end < 0 else end


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
