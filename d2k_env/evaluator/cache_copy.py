"""A worker's Triton cache: filled from its evaluator's cache before the request, new entries taken back after.

A warm worker is confined to its own cache directory (Landlock's rules are fixed when it starts,
before anyone knows which evaluator will take it), so the evaluator's cache travels by copy: every
entry into the worker's cache before the run, and afterwards each entry the worker made that the
evaluator's cache lacks. The worker is untrusted, so what comes back is only plain directories and
regular files (a link it planted could name any file the env can read), within a size bound, and
never over an entry the evaluator already holds. Triton's group files name a kernel's files by
absolute path; each copy's are rewritten to point into its own directory. What a solution can do to the evaluator's cache
this way is what it could do before, when it wrote there directly: it serves later evaluations of
the same evaluator only.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path

# The most one evaluation may add to an evaluator's cache (a task's kernels compile to a few MB).
HARVEST_LIMIT_BYTES = 256 * 2**20
# Triton's index of a compiled kernel's files: JSON naming each file by its absolute path, so a
# copy points at the copy's own directory (else every worker finds the entry broken and compiles).
GROUP_PREFIX = "__grp__"
PARTIAL_SUFFIX = ".partial"  # an entry being harvested, renamed into place once whole
# One harvest at a time in a process: two workers of one evaluation (the check, and the memory-checked
# run beside it) may bring back the same entry, and only one copy may become it.
_HARVESTING = threading.Lock()


def seed_cache(cache: Path, worker_cache: Path) -> None:
    """Copy every entry of ``cache`` into ``worker_cache`` (an empty directory)."""
    if cache.is_dir():
        for entry in os.scandir(cache):
            if not entry.name.endswith(PARTIAL_SUFFIX):  # half-copied: its whole version is not there yet
                _copy(Path(entry.path), worker_cache / entry.name, None)


def harvest_cache(worker_cache: Path, cache: Path) -> int:
    """Copy into ``cache`` each top-level entry of ``worker_cache`` that ``cache`` lacks, with only
    its directories and regular files, while the total stays within ``HARVEST_LIMIT_BYTES`` (an
    entry that would pass it is left out whole). Returns the bytes copied."""
    cache.mkdir(parents=True, exist_ok=True)
    with _HARVESTING:
        return _harvest(worker_cache, cache)


def _harvest(worker_cache: Path, cache: Path) -> int:
    budget = [HARVEST_LIMIT_BYTES]
    copied = 0
    for entry in sorted(os.scandir(worker_cache), key=lambda e: e.name):
        target = cache / entry.name
        if os.path.lexists(target) or entry.name.endswith(PARTIAL_SUFFIX):
            continue
        before = budget[0]
        partial = cache / f".{entry.name}{PARTIAL_SUFFIX}"
        shutil.rmtree(partial, ignore_errors=True)
        if _copy(Path(entry.path), partial, budget, target):
            if os.path.lexists(partial):  # nothing was made of a link or a special file
                os.rename(partial, target)  # whole or not at all: a reader never sees half an entry
            copied += before - budget[0]
        else:
            shutil.rmtree(partial, ignore_errors=True)
            budget[0] = before
    return copied


def _copy(source: Path, target: Path, budget: list[int] | None, home: Path | None = None) -> bool:
    """Copy ``source`` (a directory or a regular file; anything else is skipped) to ``target``, which
    will be found at ``home`` (default: ``target``); ``budget[0]``, where given, counts down the
    bytes allowed. False when the budget ran out."""
    home = home or target
    info = os.lstat(source)
    if stat.S_ISDIR(info.st_mode):
        target.mkdir()
        return all(_copy(Path(entry.path), target / entry.name, budget, home / entry.name)
                   for entry in os.scandir(source))
    if stat.S_ISREG(info.st_mode):
        if budget is not None:
            if info.st_size > budget[0]:
                return False
            budget[0] -= info.st_size
        # O_NOFOLLOW: the worker may swap the file for a link between the lstat and the open; and no
        # more than the size counted is read, should it grow meanwhile.
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as src:
            data = src.read(info.st_size)
        if source.name.startswith(GROUP_PREFIX):
            data = _regroup(data, home.parent)
            if data is None:
                return True  # not a group file Triton wrote: left out
        target.write_bytes(data)
        return True
    return True  # links, pipes, sockets, devices: not part of a cache


def _regroup(data: bytes, directory: Path) -> bytes | None:
    """A group file's JSON with each child path moved into ``directory`` (kept by its file name
    only, so no path can point elsewhere); None when it is not such a file."""
    try:
        children = json.loads(data)["child_paths"]
        moved = {str(name): str(directory / Path(path).name) for name, path in children.items()
                 if isinstance(path, str) and Path(path).name not in ("", ".", "..")}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return json.dumps({"child_paths": moved}).encode()
