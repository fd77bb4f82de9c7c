"""Removing a directory tree that an untrusted process shaped: no recursion, no link followed, no exception.

A solution may leave anything in the directories it can write (its scratch, its Triton cache, its
outputs): a chain of 10,000 directories, 100,000 entries, directories without permissions, links to
anywhere. ``shutil.rmtree`` recurses once per level (Python 3.11 and 3.12 raise ``RecursionError``
about 1,000 levels down, even with ``ignore_errors``) and builds paths longer than ``PATH_MAX``.

:func:`remove_tree` works one directory at a time, through descriptors relative to their parent,
never through a long path. Every entry of the top directory is unlinked (files, links, pipes,
sockets: a link is removed, never followed), or removed if it is an empty directory; a directory
that is not empty is emptied the same way, its own non-empty directories being moved up into the
top directory under fresh names to be emptied in turn. So the tree is never more than two levels
deep while it is taken apart, at most two directories are open at once, and each entry is handled a
bounded number of times: the work is linear in the number of entries, whatever their shape. A
directory whose permissions keep its owner out is given them (``chmod`` of the directory itself,
through a descriptor that pins it, never through a link) before it is read or changed.

What it cannot remove (another user's file in a directory it may not change, a mount point, an
immutable file) it leaves in place, logs (the first few by name, the rest counted) and goes on
with the rest; its result says whether the path is gone. Only the path's own components are
trusted (no link planted among them): below it, anything goes.

Standard library only: the supervisor (:mod:`d2k_env.evaluator.reaper`), which never imports the
package, loads this file by path.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import stat

log = logging.getLogger("d2k_env.removal")

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWNER_ALL = stat.S_IRWXU
# Passes over the top directory: one removes everything removable; a second finds what a directory
# listing that changed under it may have missed. What is left after these cannot be removed.
PASSES = 3
NAMED_FAILURES = 5  # failures the log names; the rest are counted


class _Failures:
    """What could not be removed: counted once each (a later pass meets it again), the first few
    kept for the log."""

    def __init__(self):
        self.seen, self.named = set(), []

    @property
    def count(self) -> int:
        return len(self.seen)

    def add(self, what: str, exc: OSError) -> None:
        if what not in self.seen:
            self.seen.add(what)
            if len(self.named) < NAMED_FAILURES:
                self.named.append(f"{what}: {exc.strerror or exc}")


def remove_tree(path: str | os.PathLike) -> bool:
    """Remove ``path`` and everything below it (a link or a file at ``path`` is unlinked); never
    raises. True when ``path`` is gone (or never was); False when something was left, which is
    logged (see the module's docstring)."""
    path = os.path.abspath(os.fspath(path))
    parent_path, name = os.path.split(path)
    failures = _Failures()
    try:
        parent = os.open(parent_path, _DIRECTORY & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as exc:
        failures.add(parent_path, exc)
        parent = None
    gone = False
    if parent is not None:
        try:
            if name:
                gone = _remove(parent, name, path, failures)
            else:
                failures.add(path, OSError(errno.EINVAL, "the root directory is never removed"))
        finally:
            os.close(parent)
    if failures.count:
        log.warning("could not remove %d entr%s of %s (left in place): %s", failures.count,
                    "y" if failures.count == 1 else "ies", path, "; ".join(failures.named))
    return gone


def _remove(parent: int, name: str, path: str, failures: _Failures) -> bool:
    """Remove ``name`` in directory ``parent`` (shown as ``path`` in the log); whether it is gone."""
    if not _is_directory(parent, name):
        return _unlink(parent, name, path, failures)
    top = _open_directory(parent, name, path, failures)
    if top is None:
        return False
    try:
        fresh = (f".d2k-rm-{os.getpid()}-{n}" for n in itertools.count())
        for attempt in itertools.count(1):
            last = not _take_apart(top, path, fresh, failures) or attempt == PASSES
            if _rmdir(parent, name, path, failures, quiet_if_full=not last):
                return True
            if last:
                return False
    finally:
        os.close(top)


def _take_apart(top: int, path: str, fresh, failures: _Failures) -> bool:
    """One pass over the top directory: everything in it removed that can be; whether anything was."""
    pending: list[str] = []  # directories in ``top`` still to empty and remove
    progress = _empty(top, top, path, pending, fresh, failures)
    while pending:
        name = pending.pop()
        directory = _open_directory(top, name, f"{path}/{name}", failures)
        if directory is None:
            continue
        try:
            progress |= _empty(directory, top, f"{path}/{name}", pending, fresh, failures)
        finally:
            os.close(directory)
        progress |= _rmdir(top, name, f"{path}/{name}", failures, quiet_if_full=True)
    return progress


def _empty(directory: int, top: int, where: str, pending: list[str], fresh, failures: _Failures) -> bool:
    """Remove what ``directory`` holds: files and links unlinked, empty directories removed, other
    directories added to ``pending`` (moved up into ``top`` under a fresh name first, unless this is
    ``top``). Whether anything was removed or moved."""
    progress = False
    try:
        entries = os.scandir(directory)
    except OSError as exc:
        failures.add(where, exc)
        return False
    with entries:
        while True:
            try:
                entry = next(entries)
            except StopIteration:
                break
            except OSError as exc:  # the listing itself broke off
                failures.add(where, exc)
                break
            name = entry.name
            if not _is_directory(directory, name, entry):
                progress |= _unlink(directory, name, f"{where}/{name}", failures)
            elif _rmdir(directory, name, f"{where}/{name}", failures, quiet_if_full=True):
                progress = True
            elif directory == top:
                pending.append(name)
            elif (moved := _move_up(directory, name, top, f"{where}/{name}", fresh, failures)) is not None:
                pending.append(moved)
                progress = True
    return progress


def _is_directory(directory: int, name: str, entry: os.DirEntry | None = None) -> bool:
    try:
        if entry is not None:
            return entry.is_dir(follow_symlinks=False)
        return stat.S_ISDIR(os.lstat(name, dir_fd=directory).st_mode)
    except OSError:
        return False  # gone, or unreadable: unlinking it says which


def _unlink(directory: int, name: str, where: str, failures: _Failures) -> bool:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    except OSError as exc:
        failures.add(where, exc)
        return False
    return True


def _rmdir(directory: int, name: str, where: str, failures: _Failures, quiet_if_full: bool) -> bool:
    """Remove the directory ``name`` if it is empty; a full one is no failure when ``quiet_if_full``."""
    try:
        os.rmdir(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if not (quiet_if_full and exc.errno in (errno.ENOTEMPTY, errno.EEXIST)):
            failures.add(where, exc)
        return False
    return True


def _open_directory(parent: int, name: str, where: str, failures: _Failures) -> int | None:
    """A descriptor of the directory ``name`` (never a link), its owner's permissions restored first
    where they keep it from being read or changed; None when it cannot be opened."""
    try:
        try:
            directory = os.open(name, _DIRECTORY, dir_fd=parent)
        except PermissionError:
            _grant_owner(parent, name)
            directory = os.open(name, _DIRECTORY, dir_fd=parent)
        if os.fstat(directory).st_mode & _OWNER_ALL != _OWNER_ALL:
            try:
                os.fchmod(directory, _OWNER_ALL)
            except OSError:
                pass  # not its owner: what it cannot change is logged as it fails
        return directory
    except FileNotFoundError:
        return None
    except OSError as exc:
        failures.add(where, exc)
        return None


def _grant_owner(parent: int, name: str) -> None:
    """Owner's read, write and search permission on the directory ``name``, never through a link:
    pinned by an ``O_PATH`` descriptor (which needs no permission), changed through /proc's name
    for that descriptor (``fchmod`` refuses one opened with ``O_PATH``)."""
    pinned = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if not stat.S_ISDIR(os.fstat(pinned).st_mode):
            raise PermissionError(errno.EACCES, "not a directory whose permissions may be changed")
        os.chmod(f"/proc/self/fd/{pinned}", _OWNER_ALL)
    finally:
        os.close(pinned)


def _move_up(directory: int, name: str, top: int, where: str, fresh, failures: _Failures) -> str | None:
    """Move the directory ``name`` into ``top`` under a fresh name (moving a directory changes its
    ``..``: it needs its own write permission); that name, or None where it cannot be moved."""
    for _ in range(2):
        target = next(fresh)
        while _exists(top, target):  # names are not reused, but the tree may hold some already
            target = next(fresh)
        try:
            os.rename(name, target, src_dir_fd=directory, dst_dir_fd=top)
            return target
        except FileNotFoundError:
            return None
        except PermissionError as exc:
            try:
                _grant_owner(directory, name)
            except OSError:
                failures.add(where, exc)
                return None
        except OSError as exc:
            failures.add(where, exc)
            return None
    failures.add(where, PermissionError(errno.EACCES, "cannot be moved"))
    return None


def _exists(directory: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=directory)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True
