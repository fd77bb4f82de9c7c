"""The env's observation and action spaces: text of any printable character, safe in vector envs.

:class:`UnicodeText` is a Gymnasium ``Text`` space whose charset is every character of Unicode's
Basic Multilingual Plane except the control characters (newline and tab are allowed) and the
surrogates: source files hold ``µs``, ``é`` and box-drawing characters, and an agent must see them
as they are to quote them back in ``str_replace``. Characters outside it (other planes, such as
emoji, and control characters) are escaped by :func:`d2k_env.env.to_observation`. The action
space is one too; it describes what a sampled action holds, and the env takes any text.

Two things plain ``Text`` cannot do here:

- its constructor enumerates the charset eagerly (63,425 characters: a third of a second and 13 MB
  per space); this space enumerates it only when asked (sampling, flattening), once per process;
- ``AsyncVectorEnv`` with shared memory (its default) reads a ``Text`` buffer once, when it is made,
  into immutable strings, so every later observation came back as the padding it first held. This
  space registers its own shared-memory layout (code points, zero-padded) and a batch that decodes
  the buffer when read: a copy of it (the vector env returns a copy by default) is a tuple of
  strings, as ``SyncVectorEnv`` returns.
"""

from __future__ import annotations

import functools
import multiprocessing
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.space import Space
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

# Every allowed character, as a regex class: tab, newline, printable ASCII, then the BMP past the
# C1 controls with the surrogates left out.
_ALLOWED = "\t\n\x20-\x7e\xa0-\ud7ff\ue000-\uffff"
_OUTSIDE = re.compile(f"[^{_ALLOWED}]")
DESCRIPTION = "Unicode's Basic Multilingual Plane without control characters (but newline and tab) and surrogates"


def allowed(char: str) -> bool:
    """Whether ``char`` (one character) is in the charset."""
    return _OUTSIDE.match(char) is None


def escape(char: str) -> str:
    """How a character outside the charset is shown: Python's escape for it (``\\x1b``, ``\\U0001f600``)."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escaped(text: str) -> str:
    """``text`` with every character outside the charset replaced by its :func:`escape`."""
    return _OUTSIDE.sub(lambda m: escape(m.group()), text)


@functools.cache
def _charset() -> tuple[tuple[str, ...], frozenset[str], dict[str, np.int32]]:
    """The charset enumerated (sorted list, set, index), built once per process and shared: all of
    it is immutable."""
    chars = tuple(c for c in map(chr, range(0x10000)) if allowed(c))
    return chars, frozenset(chars), {c: np.int32(i) for i, c in enumerate(chars)}


class UnicodeText(spaces.Text):
    """A ``Text`` space over :data:`DESCRIPTION` (see the module docstring)."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None):
        # Text.__init__ would enumerate the charset; the checks it makes on the lengths are these.
        integral = all(np.issubdtype(type(n), np.integer) for n in (min_length, max_length))
        if not integral or not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length (ints), not {min_length!r}, {max_length!r}")
        self.min_length, self.max_length = int(min_length), int(max_length)
        Space.__init__(self, dtype=str, seed=seed)

    @property
    def character_list(self) -> tuple[str, ...]:
        return _charset()[0]

    @property
    def character_set(self) -> frozenset[str]:
        return _charset()[1]

    def character_index(self, char: str) -> np.int32:
        return _charset()[2][char]

    @property
    def characters(self) -> str:
        return "".join(self.character_list)

    def contains(self, x: Any) -> bool:
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and _OUTSIDE.search(x) is None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UnicodeText):  # same charset by construction: no need to enumerate it
            return (self.min_length, self.max_length) == (other.min_length, other.max_length)
        return super().__eq__(other)

    __hash__ = None  # as Text: equal spaces need not be one object

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length}, charset={DESCRIPTION})"


# -- shared memory (AsyncVectorEnv) ---------------------------------------------------------------
class SharedTexts(Sequence):
    """The batch of ``n`` texts in a shared buffer, decoded on every read. ``copy.deepcopy`` and
    pickling give a plain tuple of the texts as they are now."""

    def __init__(self, buffer: Any, n: int, max_length: int):
        self._rows = np.frombuffer(buffer.get_obj(), dtype=np.uint32).reshape(n, max_length)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._rows[index]
        zeros = np.flatnonzero(row == 0)  # NUL is outside the charset: the first one ends the text
        end = int(zeros[0]) if len(zeros) else len(row)
        return row[:end].astype("<u4").tobytes().decode("utf-32-le")

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (SharedTexts, tuple)) else other)

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __reduce__(self):
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(UnicodeText)
def _create(space: UnicodeText, n: int = 1, ctx: Any = multiprocessing):
    return ctx.Array("I", n * space.max_length)


@read_from_shared_memory.register(UnicodeText)
def _read(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)


@write_to_shared_memory.register(UnicodeText)
def _write(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    codes = np.frombuffer(value.encode("utf-32-le"), dtype="<u4")
    if len(codes) > space.max_length:
        raise ValueError(f"a text of {len(codes)} characters does not fit a space of at most {space.max_length}")
    rows = np.frombuffer(shared_memory.get_obj(), dtype=np.uint32)
    start = index * space.max_length
    rows[start:start + len(codes)] = codes
    rows[start + len(codes):start + space.max_length] = 0
