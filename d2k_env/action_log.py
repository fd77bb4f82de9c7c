"""The record of an episode's actions: what replay needs, and no more.

One entry per step, as JSON-able data:

- a tool call that ran, ``{"tool": name, "args": {...}}``: its arguments as parsed, except that a
  string of :data:`BLOB_CHARS` characters or more becomes ``{"blob": sha256}`` and its text is kept
  once, in the log's blob table, however many times and to whichever files it is written;
- a refused action, ``{"refused": message, "chars": n, "sha256": digest}``: the message the step
  showed, the action's length and the SHA-256 of its UTF-8 text, never the text itself. A refusal
  (an action too long, not a tool call, or one its tool refused) changes nothing but the step count
  (the workspace guarantees that a refused operation leaves it as it was), so the message is all a
  replay needs, and an action of megabytes costs a few hundred bytes.

Recording the parsed call rather than the text loses nothing: the call is what ran, and replay
steps it again as a dict action.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from d2k_env.tools import ToolCall

BLOB_CHARS = 1024  # shorter strings stay in their entry: a table row would cost more than it saves


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates are legal in actions and files


@dataclass(frozen=True)
class Refusal:
    """A refused step: the message it showed, and the length and SHA-256 of the action refused."""

    message: str
    chars: int
    sha256: str

    @classmethod
    def of(cls, action: str, message: str) -> "Refusal":
        return cls(message, len(action), hashlib.sha256(_utf8(action)).hexdigest())

    def entry(self) -> dict[str, Any]:
        return {"refused": self.message, "chars": self.chars, "sha256": self.sha256}


class ActionLog:
    """The entries of one episode (see the module docstring), appended one per step."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        # UTF-8, keyed by its SHA-256: bytes are the compact exact form (a str holding one emoji
        # takes four bytes for every character).
        self._blobs: dict[str, bytes] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add_call(self, call: ToolCall) -> None:
        self._entries.append({"tool": call.tool, "args": {k: self._stored(v) for k, v in call.args.items()}})

    def add_refusal(self, refusal: Refusal) -> None:
        self._entries.append(refusal.entry())

    def state(self) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The entries and the blob table, as copies the caller may change."""
        return (copy.deepcopy(self._entries),
                {key: data.decode("utf-8", "surrogatepass") for key, data in self._blobs.items()})

    def _stored(self, value: Any) -> Any:
        if not isinstance(value, str) or len(value) < BLOB_CHARS:
            return value
        data = _utf8(value)
        key = hashlib.sha256(data).hexdigest()
        self._blobs.setdefault(key, data)
        return {"blob": key}


def replay_steps(entries: Any, blobs: Any) -> list[dict[str, Any] | Refusal]:
    """A state's entries and blob table as the steps to take again: a dict action to step, or the
    :class:`Refusal` to record. Every entry is checked before the first step is taken; a malformed
    one is a ValueError saying which."""
    if not isinstance(entries, list):
        raise ValueError(f"the state's actions are a list, not a {type(entries).__name__}")
    if not isinstance(blobs, dict) or not all(isinstance(text, str) for text in blobs.values()):
        raise ValueError("the state's blobs are a dict of strings")
    return [_replay_step(n, entry, blobs) for n, entry in enumerate(entries, 1)]


def _replay_step(n: int, entry: Any, blobs: dict[str, str]) -> dict[str, Any] | Refusal:
    if isinstance(entry, dict) and entry.keys() == {"refused", "chars", "sha256"}:
        message, chars, digest = entry["refused"], entry["chars"], entry["sha256"]
        if isinstance(message, str) and isinstance(chars, int) and isinstance(digest, str):
            return Refusal(message, chars, digest)
    elif isinstance(entry, dict) and entry.keys() == {"tool", "args"} and isinstance(entry["args"], dict):
        args = {}
        for key, value in entry["args"].items():
            if isinstance(value, dict):
                blob = value.get("blob")
                if value.keys() != {"blob"} or not isinstance(blob, str) or blob not in blobs:
                    raise ValueError(f"the state's action {n} names a blob that is not in its blobs: "
                                     f"{repr(value)[:100]}")
                value = blobs[blob]
            args[key] = value
        return {"tool": entry["tool"], "args": args}
    raise ValueError(f"the state's action {n} is neither a tool call nor a refusal, as KernelEnv.state() "
                     f"writes them: {repr(entry)[:100]}")
