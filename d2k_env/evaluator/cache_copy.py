"""A worker's Triton cache: filled from its evaluator's cache before the request, new entries admitted after.

A warm worker is confined to its own cache directory (Landlock's rules are fixed when it starts,
before anyone knows which evaluator will take it), so no Triton cache is shared: the evaluator's
travels by copy. Before the run its entries are copied into the worker's cache; afterwards this
process, which trusts nothing the worker left there, admits into the evaluator's cache the entries
the worker made that the evaluator's cache lacks. A solution may have left any tree in its cache
(10,000 levels deep, 20,000 empty directories, links to anywhere), so nothing is walked past a
limit and only Triton's own layout is admitted (its ``FileCacheManager`` writes
``<cache>/<key>/<file>``):

- An entry is a directory directly in the cache (not a link; no name starting with ``.``, which
  are this module's own half-copied entries) holding regular files, at most ``FILES_PER_ENTRY``
  names in all. Only its regular files are copied, each read through a descriptor that follows no
  link, no more than the size counted: a subdirectory (Triton's ``tmp.pid_*`` of a write that was
  cut short, or anything else) is never entered, and links, pipes, sockets and devices are left out
  (a link could name any file the env can read). An entry with more names, or without a single
  file, is left out whole; so is anything else in the cache.
- One evaluation adds at most ``HARVEST_ENTRIES`` entries and ``HARVEST_LIMIT_BYTES`` bytes, never
  over an entry the evaluator holds; an entry that would pass a limit is left out whole. The
  worker's cache is listed no further than ``LISTED_NAMES`` names (in name order within them).
- The evaluator's cache holds at most ``ENTRY_LIMIT`` entries and ``CACHE_LIMIT_BYTES`` bytes:
  once full, nothing more is admitted (later evaluations compile what it lacks).
- The seed copies the evaluator's cache under the same rules and limits (a directory the caller
  named may hold more).

Triton's group files name a kernel's files by absolute path; each copy's are rewritten to point
into its own directory. What a solution can do to the evaluator's cache this way is add entries of
plain files within these limits, which serve later evaluations of the same evaluator only, as
when it wrote there directly; it cannot make their copying or removal raise or take long.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

from d2k_env.removal import remove_tree

# The most one evaluation may add to an evaluator's cache: bytes (a task's kernels compile to a few
# MB) and entries (one per compiled specialization and launcher; an autotuned kernel makes one per
# config and shape family).
HARVEST_LIMIT_BYTES = 256 * 2**20
HARVEST_ENTRIES = 128
# The most an evaluator's cache holds, and so what each worker is seeded with.
ENTRY_LIMIT = 1024
CACHE_LIMIT_BYTES = 512 * 2**20
FILES_PER_ENTRY = 32  # Triton writes 5 to 8 per kernel (IRs, binary, metadata, group), one per launcher
LISTED_NAMES = ENTRY_LIMIT + HARVEST_ENTRIES  # the most names read from a cache directory
# Triton's index of a compiled kernel's files: JSON naming each file by its absolute path, so a
# copy points at the copy's own directory (else every worker finds the entry broken and compiles).
GROUP_PREFIX = "__grp__"
PARTIAL_SUFFIX = ".partial"  # an entry being harvested, renamed into place once whole
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# One harvest at a time in a process: two workers of one evaluation (the check, and the memory-checked
# run beside it) may bring back the same entry, and only one copy may become it.
_HARVESTING = threading.Lock()


def seed_cache(cache: Path, worker_cache: Path) -> None:
    """Copy the entries of ``cache`` into ``worker_cache`` (an empty directory), within the limits."""
    room = CACHE_LIMIT_BYTES
    for count, entry in enumerate(e for e in _listing(cache)[0] if _is_entry(e)):
        if count == ENTRY_LIMIT:
            break
        size = _copy_entry(entry, worker_cache / entry.name, worker_cache / entry.name, room)
        if size is not None:
            room -= size


def harvest_cache(worker_cache: Path, cache: Path) -> int:
    """Admit into ``cache`` the entries of ``worker_cache`` that ``cache`` lacks, within the limits
    (see the module's docstring); never raises for what the worker left. Returns the bytes copied."""
    cache.mkdir(parents=True, exist_ok=True)
    with _HARVESTING:
        return _harvest(worker_cache, cache)


def _harvest(worker_cache: Path, cache: Path) -> int:
    entries, used, full = _census(cache)
    copied = admitted = 0
    for entry in sorted(_listing(worker_cache)[0], key=lambda e: e.name):
        if full or admitted == HARVEST_ENTRIES or entries == ENTRY_LIMIT:
            break
        target = cache / entry.name
        if not _is_entry(entry) or os.path.lexists(target):
            continue
        partial = cache / f".{entry.name}{PARTIAL_SUFFIX}"
        remove_tree(partial)
        size = _copy_entry(entry, partial, target, min(HARVEST_LIMIT_BYTES - copied, CACHE_LIMIT_BYTES - used))
        if size is not None:
            os.rename(partial, target)  # whole or not at all: a reader never sees half an entry
            copied, used, admitted, entries = copied + size, used + size, admitted + 1, entries + 1
    return copied


def _listing(directory: Path) -> tuple[list[os.DirEntry], bool]:
    """The first ``LISTED_NAMES`` entries of ``directory`` (none where it cannot be read, or is a
    link: the worker's cache is its to change, not the directory above it), and whether that was all."""
    listed = []
    if os.path.islink(directory):
        return listed, True
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if len(listed) == LISTED_NAMES:
                    return listed, False
                listed.append(entry)
    except OSError:
        pass
    return listed, True


def _is_entry(entry: os.DirEntry) -> bool:
    """Whether ``entry`` may be a cache entry: a directory, not a link, not a half-copied one."""
    try:
        return not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _census(cache: Path) -> tuple[int, int, bool]:
    """The entries of ``cache`` and their bytes (the files an entry's copy would hold), and whether
    it is full: past a limit, or more names than are listed."""
    listed, complete = _listing(cache)
    entries = used = 0
    for entry in listed:
        if _is_entry(entry):
            entries += 1
            used += sum(size for _, size in _files(entry) or ())
    return entries, used, not complete or entries >= ENTRY_LIMIT or used >= CACHE_LIMIT_BYTES


def _files(entry: os.DirEntry) -> list[tuple[str, int]] | None:
    """The regular files of the entry directory ``entry`` with their sizes; None when it is not
    Triton's layout (more than ``FILES_PER_ENTRY`` names, no file, or it cannot be read)."""
    files, names = [], 0
    try:
        directory = os.open(entry.path, _DIRECTORY)
        try:
            with os.scandir(directory) as listing:
                for item in listing:
                    names += 1
                    if names > FILES_PER_ENTRY:
                        return None
                    if item.is_file(follow_symlinks=False):
                        files.append((item.name, item.stat(follow_symlinks=False).st_size))
        finally:
            os.close(directory)
    except OSError:
        return None
    return files or None


def _copy_entry(entry: os.DirEntry, target: Path, home: Path, room: int) -> int | None:
    """Copy the entry directory ``entry``'s regular files to ``target`` (a new directory, to be
    found at ``home``), if they fit in ``room`` bytes; the bytes copied, or None when the entry is
    left out (nothing of it is left at ``target`` then)."""
    files = _files(entry)
    if files is None or sum(size for _, size in files) > room:
        return None
    copied = 0
    try:
        source = os.open(entry.path, _DIRECTORY)
        try:
            target.mkdir()
            for name, size in files:
                data = _read(source, name, size)
                if data is not None and name.startswith(GROUP_PREFIX):
                    data = _regroup(data, home)
                if data is None:  # gone since the listing, or a group file Triton did not write
                    continue
                copied += len(data)
                if copied > room:  # a group file's rewritten paths may be longer than the ones it had
                    raise OSError(f"past the {room} bytes left")
                (target / name).write_bytes(data)
        finally:
            os.close(source)
    except OSError:
        remove_tree(target)
        return None
    return copied


def _read(directory: int, name: str, size: int) -> bytes | None:
    """At most ``size`` bytes of the regular file ``name`` in ``directory``; None when it is not one
    (O_NOFOLLOW: a link swapped in after the listing is not followed)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(size)


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
