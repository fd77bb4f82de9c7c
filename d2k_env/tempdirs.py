"""Temporary directories that name the process owning them, and the sweep of those left by dead ones.

A process that is SIGKILLed cannot remove its directories (an episode's workspace, an evaluator's
Triton cache, a service's scratch). Every such directory is named ``d2k-<kind>-<owner>-XXXXXXXX``,
the owner being the process id within its pid namespace, and the first directory a process makes
removes those of the same user and pid namespace whose owner is gone. (A worker's own directory is
removed by its supervisor, see :mod:`d2k_env.evaluator.reaper`.)

Whatever a dead owner's directory holds (a solution may have left a tree 10,000 levels deep, or
100,000 entries), the sweep never raises: :func:`d2k_env.removal.remove_tree` removes it, and what
cannot be removed is logged and left, and the sweep goes on. The directories :func:`make` returns
are removed the same way.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading

from d2k_env.removal import remove_tree  # also the remover of every other evaluation tree

_swept = False
_lock = threading.Lock()


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _owner_tag() -> str:
    return f"{_namespace()}.{os.getpid()}"


class TemporaryDirectory(tempfile.TemporaryDirectory):
    """A ``tempfile.TemporaryDirectory`` whose removal (``cleanup()``, leaving its ``with``, or its
    finalizer) is :func:`~d2k_env.removal.remove_tree`'s: it never raises, whatever tree is in it."""

    @classmethod
    def _rmtree(cls, name, ignore_errors=False, **_):  # the one removal every path of the base class takes
        remove_tree(name)


def make(kind: str) -> TemporaryDirectory:
    """A ``TemporaryDirectory`` named for its owner, ``kind`` saying what it holds."""
    sweep_once()
    return TemporaryDirectory(prefix=f"d2k-{kind}-{_owner_tag()}-")


def mkdtemp(kind: str) -> str:
    """Like :func:`make`, for a directory its maker removes itself."""
    sweep_once()
    return tempfile.mkdtemp(prefix=f"d2k-{kind}-{_owner_tag()}-")


def sweep_once() -> None:
    global _swept
    with _lock:
        if not _swept:
            _swept = True
            sweep()


def sweep(root: str | None = None) -> list[str]:
    """Remove the directories of dead owners under ``root`` (the temporary directory); returns those
    removed. Never raises: what cannot be removed is logged and left."""
    root = root or tempfile.gettempdir()
    namespace, uid, removed = _namespace(), os.getuid(), []
    pattern = re.compile(rf"^d2k-[A-Za-z0-9_.]+-{namespace}\.(\d+)-")
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        try:  # other processes sweep too: an entry may be gone between the listing and here
            if not match or not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        if not _alive(int(match.group(1))) and remove_tree(entry.path):
            removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
