"""The episode workspace: a directory of text files the agent edits through tools.

Every path is resolved (symlinks included) and must stay inside the workspace; read-only files
(the baseline copy) refuse writes. Errors are raised as :class:`WorkspaceError` with a message
meant for the agent, and an operation that raises one leaves the workspace as it was (the episode
records such a step as a refusal, without its arguments, and replays it from its message alone).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

MAX_FILE_BYTES = 1_000_000
MAX_PATH_DEPTH = 16  # directories deep: more than any solution needs, far less than recursion limits


class WorkspaceError(Exception):
    """A file operation the agent asked for that cannot be done; the message says why."""


@contextlib.contextmanager
def _os_errors(path: str):
    """File-system failures (names too long, a file where a directory is expected, ...) as messages."""
    try:
        yield
    except (OSError, UnicodeError) as exc:
        raise WorkspaceError(f"cannot access {path[:200]!r}: {getattr(exc, 'strerror', None) or exc}") from None


class Workspace:
    def __init__(self, root: Path, read_only: set[str] | None = None):
        self.root = root.resolve()
        self.read_only = set(read_only or ())

    def resolve(self, path: str) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string, relative to the workspace")
        if "\x00" in path:
            raise WorkspaceError("path contains a NUL character")
        candidate = Path(path)
        if candidate.is_absolute():
            raise WorkspaceError(f"{path!r} is absolute; use a path relative to the workspace")
        if len(candidate.parts) > MAX_PATH_DEPTH:
            raise WorkspaceError(f"{path[:200]!r} is {len(candidate.parts)} components deep; at most "
                                 f"{MAX_PATH_DEPTH} are allowed")
        try:
            full = (self.root / candidate).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, names the OS refuses
            raise WorkspaceError(f"{path[:200]!r} cannot be resolved: {exc}") from None
        if full != self.root and self.root not in full.parents:
            raise WorkspaceError(f"{path!r} points outside the workspace; only files inside it are reachable")
        return full

    def relative(self, full: Path) -> str:
        return full.relative_to(self.root).as_posix()

    def list_files(self) -> list[tuple[str, int]]:
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("__pycache__"))
            for name in sorted(filenames):
                full = Path(dirpath) / name
                if not full.is_symlink():
                    files.append((self.relative(full), full.stat().st_size))
        return files

    def texts(self) -> dict[str, str]:
        """Every file's content (as :meth:`list_files` lists them), exactly as written: lone
        surrogates come back as they went in. Bytes that are not UTF-8, which no tool writes, are
        replaced."""
        texts = {}
        for path, _ in self.list_files():
            data = (self.root / path).read_bytes()
            try:
                texts[path] = data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                texts[path] = data.decode("utf-8", "replace")
        return texts

    def read(self, path: str) -> str:
        full = self.resolve(path)
        with _os_errors(path):
            if not full.is_file():
                raise WorkspaceError(f"no file {path!r} in the workspace (list_files shows what exists)")
            data = full.read_bytes()
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"{path!r} is {len(data)} bytes; files over {MAX_FILE_BYTES} bytes are not read")
        return data.decode("utf-8", "replace")

    def write(self, path: str, content: str) -> int:
        full = self.resolve(path)
        rel = self.relative(full)
        if rel in self.read_only:
            raise WorkspaceError(f"{rel!r} is read-only; write your kernel in solution.py")
        if not isinstance(content, str):
            raise WorkspaceError("content must be a string")
        data = content.encode("utf-8", "surrogatepass")
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"content is {len(data)} bytes; files are limited to {MAX_FILE_BYTES} bytes")
        with _os_errors(path):
            if full.is_dir():
                raise WorkspaceError(f"{rel!r} is a directory")
            made: list[Path] = []  # the directories this write creates, removed again if it fails
            try:
                for parent in reversed(Path(rel).parents[:-1]):  # outermost first, the root excluded
                    directory = self.root / parent
                    if not directory.is_dir():
                        directory.mkdir()
                        made.append(directory)
                _replace(full, data)
            except BaseException:
                for directory in reversed(made):
                    directory.rmdir()
                raise
        return len(data)

    def str_replace(self, path: str, old: str, new: str) -> int:
        text = self.read(path)
        if not isinstance(old, str) or not old:
            raise WorkspaceError("old must be a non-empty string")
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            hint = _miss_hint(text, old) if count == 0 else "include more surrounding lines to make it unique"
            raise WorkspaceError(f"old {where} in {path!r}; it must occur exactly once ({hint})")
        self.write(path, text.replace(old, new, 1))
        return text[: text.index(old)].count("\n") + 1


_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))")


def _unescaped(text: str) -> str:
    """``text`` with the escapes observations use (``\\xNN``, ``\\uNNNN``, ``\\UNNNNNNNN``) as characters."""
    def char(match: re.Match) -> str:
        code = int(next(g for g in match.groups() if g), 16)
        return chr(code) if code <= 0x10FFFF else match.group()
    return _ESCAPE.sub(char, text)


def _miss_hint(text: str, old: str) -> str:
    """Why ``old`` may not occur in ``text`` when the agent copied it from read_file: the file's line
    ends (read_file shows CRLF as LF) or characters read_file showed as escapes."""
    crlf = old.replace("\r\n", "\n").replace("\n", "\r\n")
    if "\n" in old and "\r\n" in text and text.count(crlf) >= 1:
        return ("the file's lines end in CRLF (\\r\\n), which read_file shows as \\n: write old (and new) "
                "with \\r\\n line ends")
    if _ESCAPE.search(old) and _unescaped(old) in text:
        return ("old holds escapes such as \\xb5 as read_file shows characters it cannot display; the file "
                "holds the characters themselves: write them as such, or in JSON as \\u00b5")
    return "copy it exactly from read_file, whitespace included"


def _replace(full: Path, data: bytes) -> None:
    """Replace ``full``'s content by ``data`` atomically: a failure never leaves a half-written file.
    The staging file is fresh and exclusively created, so nothing planted in the workspace (a
    symlink or a directory with a predictable name) can redirect or block the write."""
    fd, tmp = tempfile.mkstemp(dir=full.parent, prefix=".d2k-write-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, full)
    except BaseException:
        os.unlink(tmp)
        raise
