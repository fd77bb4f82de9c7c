"""The long strings of an episode's record, each kept once, most as a delta of the one before.

An agent that rewrites a 300 KB file 350 times with small changes sends 105 MB of content; kept
whole, the record (and the env's memory) grew by all of it. Here each distinct string is kept once,
keyed by the SHA-256 of its UTF-8 (lone surrogates included), and each after the first as the
lines it shares with the string stored just before it plus the lines it adds:

- ``{"text": str}``: the string itself (the first, or one a delta would not shorten);
- ``{"base": key, "ops": [...]}``: ``base`` is the key stored just before this one; each op is
  ``[start, end]`` (lines ``start:end`` of the base, as ``str.splitlines(keepends=True)`` cuts
  them, in any order) or a string (inserted as it is). The ops joined give the string.

The table is JSON as it is. A table from elsewhere is checked whole before use (shape, chain order,
and every key against the SHA-256 of the string it rebuilds), holding one string at a time.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates are legal in actions and files


def key_of(text: str) -> str:
    return hashlib.sha256(utf8(text)).hexdigest()


def _delta(base: str, text: str) -> list[Any]:
    """``text`` as ops over ``base`` (see the module docstring), in time linear in their lengths.

    Each run of lines of ``text`` that ``base`` holds too, found from a pair of lines in a row (a
    single common line, say a blank one, anchors nothing), becomes a copy of the base's lines,
    wherever they are there (moved lines too); the rest is inserted as it is. Not the shortest
    delta an LCS would give, but an LCS can take time quadratic in the number of lines (a
    comment added after every line of a long file did), and a step must never wait on it.
    """
    old, new = base.splitlines(keepends=True), text.splitlines(keepends=True)
    anchors: dict[tuple[str, str], int] = {}
    for i in range(len(old) - 1):
        anchors.setdefault((old[i], old[i + 1]), i)
    ops: list[Any] = []
    inserted: list[str] = []
    j, follow = 0, -1  # follow: the base line after the last copied run (a run that goes on is preferred)
    while j < len(new):
        pair = (new[j], new[j + 1]) if j + 1 < len(new) else None
        if 0 <= follow < len(old) - 1 and pair == (old[follow], old[follow + 1]):
            start = follow
        else:
            start = anchors.get(pair, -1) if pair is not None else -1
        if start < 0:
            inserted.append(new[j])
            j += 1
            continue
        length = 2
        while j + length < len(new) and start + length < len(old) and new[j + length] == old[start + length]:
            length += 1
        if inserted:
            ops.append("".join(inserted))
            inserted = []
        ops.append([start, start + length])
        j, follow = j + length, start + length
    if inserted:
        ops.append("".join(inserted))
    return ops


def _apply(base: str, ops: list[Any]) -> str:
    lines = base.splitlines(keepends=True)
    return "".join("".join(lines[op[0]:op[1]]) if isinstance(op, list) else op for op in ops)


def _size(ops: list[Any]) -> int:
    return sum(len(op) if isinstance(op, str) else 16 for op in ops)


class BlobStore:
    """Strings by key (see the module docstring). ``put`` and ``get``; :meth:`table` and
    :meth:`from_table` for the JSON form."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        # The string stored last (the next one's base) and the one read last (replay reads in order).
        self._last: tuple[str, str] | None = None
        self._read: tuple[str, str] | None = None

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def put(self, text: str) -> str:
        """Keep ``text`` (once); its key."""
        key = key_of(text)
        if key in self._records:
            return key
        record: dict[str, Any] = {"text": text}
        if self._last is not None:
            ops = _delta(self._last[1], text)
            if _size(ops) < len(text):
                record = {"base": self._last[0], "ops": ops}
        self._records[key] = record
        self._last = (key, text)
        return key

    def get(self, key: str) -> str:
        """The string stored as ``key`` (a KeyError if none is)."""
        for known in (self._read, self._last):
            if known is not None and known[0] == key:
                return known[1]
        deltas = []  # back to a whole string, or to the one read last (replay reads in order)
        while True:
            record = self._records[deltas[-1]["base"] if deltas else key]
            if "text" in record:
                text = record["text"]
                break
            deltas.append(record)
            if self._read is not None and record["base"] == self._read[0]:
                text = self._read[1]
                break
        for record in reversed(deltas):
            text = _apply(text, record["ops"])
        self._read = (key, text)
        return text

    def table(self) -> dict[str, dict[str, Any]]:
        """The records as JSON-able data; a copy the caller may change."""
        return {key: _copy(record) for key, record in self._records.items()}

    @classmethod
    def from_table(cls, table: Any) -> "BlobStore":
        """A store holding ``table`` (as :meth:`table` writes it), checked whole: a ValueError says
        what is wrong."""
        if not isinstance(table, dict):
            raise ValueError(f"the state's blobs are a dict, not a {type(table).__name__}")
        store = cls()
        previous: tuple[str, str] | None = None
        for key, text in _rebuilt(table):
            if key_of(text) != key:
                raise ValueError(f"the state's blob {key[:16]}... does not rebuild the string it names (SHA-256)")
            previous = (key, text)
        store._records = {key: _copy(record) for key, record in table.items()}  # the caller's stays theirs
        store._last = previous
        return store


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    if "text" in record:
        return {"text": record["text"]}
    return {"base": record["base"], "ops": [list(op) if isinstance(op, list) else op for op in record["ops"]]}


def _rebuilt(table: dict[Any, Any]) -> Iterator[tuple[str, str]]:
    """Every (key, string) of a table in order, each delta on the one before; ValueError on a
    malformed record."""
    previous: tuple[str, str] | None = None
    for key, record in table.items():
        where = f"the state's blob {str(key)[:16]!r}"
        if not isinstance(key, str) or not isinstance(record, dict):
            raise ValueError(f"{where} is not a string key with a record")
        if record.keys() == {"text"} and isinstance(record["text"], str):
            text = record["text"]
        elif record.keys() == {"base", "ops"} and isinstance(record["ops"], list):
            if previous is None or record["base"] != previous[0]:
                raise ValueError(f"{where} is a delta whose base is not the blob just before it")
            lines = len(previous[1].splitlines())
            for op in record["ops"]:
                valid = isinstance(op, str) or (isinstance(op, list) and len(op) == 2 and all(
                    isinstance(n, int) and not isinstance(n, bool) for n in op) and 0 <= op[0] <= op[1] <= lines)
                if not valid:
                    raise ValueError(f"{where} has an op that is neither a string nor a range of its base's "
                                     f"{lines} lines: {repr(op)[:100]}")
            text = _apply(previous[1], record["ops"])
        else:
            raise ValueError(f"{where} is neither {{'text'}} nor {{'base', 'ops'}}: {repr(record)[:100]}")
        previous = (key, text)
        yield key, text
