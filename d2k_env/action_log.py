"""The record of an episode's actions: what replay needs, and no more.

One entry per step, as JSON-able data:

- a tool call that ran, ``{"tool": name, "args": {...}}``: its arguments as parsed, except that a
  string of :data:`BLOB_CHARS` characters or more becomes ``{"blob": sha256}`` and its text is kept
  once, in the log's blob table (:mod:`d2k_env.blob_store`: most as a delta of the one before),
  however many times and to whichever files it is written;
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
from typing import Any, Iterator

from d2k_env.blob_store import BlobStore, utf8
from d2k_env.tools import ToolCall

BLOB_CHARS = 1024  # shorter strings stay in their entry: a table row would cost more than it saves


@dataclass(frozen=True)
class Refusal:
    """A refused step: the message it showed, and the length and SHA-256 of the action refused."""

    message: str
    chars: int
    sha256: str

    @classmethod
    def of(cls, action: str, message: str) -> "Refusal":
        return cls(message, len(action), hashlib.sha256(utf8(action)).hexdigest())

    def entry(self) -> dict[str, Any]:
        return {"refused": self.message, "chars": self.chars, "sha256": self.sha256}


class ActionLog:
    """The entries of one episode (see the module docstring), appended one per step."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self.blobs = BlobStore()

    def __len__(self) -> int:
        return len(self._entries)

    def add_call(self, call: ToolCall) -> None:
        self._entries.append({"tool": call.tool, "args": {k: self._stored(v) for k, v in call.args.items()}})

    def add_refusal(self, refusal: Refusal) -> None:
        self._entries.append(refusal.entry())

    def state(self) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """The entries and the blob table, as copies the caller may change."""
        return copy.deepcopy(self._entries), self.blobs.table()

    @classmethod
    def restore(cls, entries: Any, blobs: Any) -> "ActionLog":
        """A log holding a state's entries and blob table, checked as :func:`replay_steps` does."""
        log = cls()
        log.blobs = BlobStore.from_table(blobs)
        log._entries = [_checked(n, entry, log.blobs) for n, entry in _numbered(entries)]
        return log

    def _stored(self, value: Any) -> Any:
        if not isinstance(value, str) or len(value) < BLOB_CHARS:
            return value
        return {"blob": self.blobs.put(value)}


def replay_steps(entries: Any, blobs: Any) -> Iterator[dict[str, Any] | Refusal]:
    """A state's entries and blob table as the steps to take again: a dict action to step, or the
    :class:`Refusal` to record. Every entry and blob is checked before this returns (a malformed
    one is a ValueError saying which); each step's long strings are rebuilt only when it is taken."""
    log = ActionLog.restore(entries, blobs)
    return (_as_step(entry, log.blobs) for entry in log._entries)


def _numbered(entries: Any):
    if not isinstance(entries, list):
        raise ValueError(f"the state's actions are a list, not a {type(entries).__name__}")
    return enumerate(entries, 1)


def _checked(n: int, entry: Any, blobs: BlobStore) -> dict[str, Any]:
    """A copy of entry ``n`` of a state, or a ValueError saying what is wrong with it."""
    if isinstance(entry, dict) and entry.keys() == {"refused", "chars", "sha256"}:
        if (isinstance(entry["refused"], str) and isinstance(entry["chars"], int)
                and isinstance(entry["sha256"], str)):
            return dict(entry)
    elif isinstance(entry, dict) and entry.keys() == {"tool", "args"} and isinstance(entry["args"], dict):
        for value in entry["args"].values():
            if isinstance(value, dict) and (value.keys() != {"blob"} or not isinstance(value["blob"], str)
                                            or value["blob"] not in blobs):
                raise ValueError(f"the state's action {n} names a blob that is not in its blobs: "
                                 f"{repr(value)[:100]}")
        return copy.deepcopy(entry)
    raise ValueError(f"the state's action {n} is neither a tool call nor a refusal, as KernelEnv.state() "
                     f"writes them: {repr(entry)[:100]}")


def _as_step(entry: dict[str, Any], blobs: BlobStore) -> dict[str, Any] | Refusal:
    if "refused" in entry:
        return Refusal(entry["refused"], entry["chars"], entry["sha256"])
    return {"tool": entry["tool"], "args": {key: blobs.get(value["blob"]) if isinstance(value, dict) else value
                                            for key, value in entry["args"].items()}}
