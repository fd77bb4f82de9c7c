"""Nothing a solution leaves hurts later evaluations or processes (issue 24, part 2; THREATS.md row 23).

A red team planted a 1500-level directory in a worker's Triton cache: ``shutil.rmtree`` raised
``RecursionError`` (Python 3.11 and 3.12, even with ``ignore_errors``) in the cache harvest, in
``Worker.close()`` and in every later process's temp sweep, so every new process failed at its first
``reset()``; 20,000 empty directories in an env's Triton cache made its next honest submit take 185 s
against 4.3 s. Here the remover (d2k_env.removal) and the sweep meet such trees (10,000 levels,
100,000 entries, 20,000 empty directories, directories without permissions, links to outside, a
file that cannot be removed): they never raise, and nothing of the trees remains.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from d2k_env import removal, tempdirs
from hostile_trees import chain, links, locked, many, plant


@pytest.fixture
def fast_tmp(tmp_path):
    """A directory for the trees, on tmpfs where the machine has one (100,000 entries build in about
    a second there, ten on a loaded disk), removed after the test by the remover: pytest's own
    removal of old temporary directories recurses, and would fail on them at every later run."""
    path = Path(tempfile.mkdtemp(prefix="d2k-test-trees-",
                                 dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else tmp_path))
    try:
        yield path
    finally:
        removal.remove_tree(path)


@pytest.fixture
def outside(tmp_path):
    """A directory outside every tree, holding a file: what links in the trees point at."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep").write_text("kept")
    return path


def _intact(outside: Path) -> bool:
    return (outside / "keep").read_text() == "kept"


class _Counted:
    """Counts the calls of ``os.scandir`` made by the remover: its work is linear in the tree's size."""

    def __init__(self, monkeypatch):
        self.calls, real = 0, os.scandir

        def scandir(*args):
            self.calls += 1
            return real(*args)
        monkeypatch.setattr(removal.os, "scandir", scandir)


@pytest.mark.parametrize("depth", [1500, 10_000])
def test_a_deep_chain_is_removed_without_recursion(fast_tmp, depth, monkeypatch):
    root = fast_tmp / "deep"
    root.mkdir()
    chain(root, depth)
    if depth == 1500:  # what the remover replaced: it gives up at this depth, whatever it is told
        with pytest.raises(RecursionError):
            shutil.rmtree(root, ignore_errors=True)
    counted = _Counted(monkeypatch)
    assert removal.remove_tree(root)
    assert not root.exists()
    assert counted.calls <= 2 * depth + 10, f"{counted.calls} listings for a chain of {depth}"


def test_a_hundred_thousand_entries_and_twenty_thousand_empty_directories(fast_tmp, monkeypatch):
    root = fast_tmp / "wide"
    root.mkdir()
    many(root, 100_000, directories=False)
    (root / "empties").mkdir()
    many(root / "empties", 20_000)
    counted = _Counted(monkeypatch)
    assert removal.remove_tree(root)
    assert not root.exists()
    assert counted.calls <= 10, f"{counted.calls} listings for two wide directories"


def test_locked_directories_are_opened_and_links_are_never_followed(fast_tmp, outside):
    root = fast_tmp / "mixed"
    root.mkdir()
    locked(root)
    links(root, outside)
    (root / "inner").mkdir()
    links(root / "inner", outside)
    os.chmod(root, 0o500)  # even the top: read-only for its owner
    assert removal.remove_tree(root)
    assert not os.path.lexists(root) and _intact(outside)


def test_a_link_or_a_file_as_the_path_is_unlinked_and_a_missing_one_is_gone(tmp_path, outside):
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert removal.remove_tree(link) and not os.path.lexists(link) and _intact(outside)
    file = tmp_path / "file"
    file.write_text("x")
    assert removal.remove_tree(file) and not file.exists()
    assert removal.remove_tree(tmp_path / "never-was")


def test_what_cannot_be_removed_is_logged_and_the_rest_removed(tmp_path, monkeypatch, caplog):
    root = tmp_path / "tree"
    chain(tmp_path, 50, name="tree")
    (root / "tree" / "stuck").write_text("immutable, say")
    many(root, 100, directories=False)
    real = os.unlink

    def unlink(name, *, dir_fd=None):
        if name == "stuck":
            raise PermissionError(1, "Operation not permitted")
        return real(name, dir_fd=dir_fd)
    monkeypatch.setattr(removal.os, "unlink", unlink)
    with caplog.at_level(logging.WARNING, logger="d2k_env.removal"):
        assert not removal.remove_tree(root)
    assert [p.name for p in root.rglob("*") if not p.is_dir()] == ["stuck"]
    assert "could not remove" in caplog.text and "stuck: Operation not permitted" in caplog.text


def test_a_temporary_directory_is_cleaned_up_whatever_it_holds(fast_tmp, outside, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(fast_tmp))
    directory = tempdirs.make("test-trees")
    plant(directory.name, outside, depths=(1500,))
    directory.cleanup()
    assert not os.path.lexists(directory.name) and _intact(outside)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _dead_owners_directory(root: Path, kind: str = "eval") -> Path:
    """A directory named as a process that is gone would name it (see d2k_env.tempdirs)."""
    path = root / f"d2k-{kind}-{tempdirs._namespace()}.{_dead_pid()}-hostile"
    path.mkdir()
    return path


def test_the_sweep_removes_hostile_trees_of_dead_owners_and_goes_on_past_what_it_cannot(fast_tmp, outside,
                                                                                           monkeypatch, caplog):
    first, second = _dead_owners_directory(fast_tmp), _dead_owners_directory(fast_tmp, "cache")
    plant(first, outside, depths=(1500,), empties=2000)
    chain(second, 1500)
    (second / "stuck").write_text("x")
    real = os.unlink
    monkeypatch.setattr(removal.os, "unlink", lambda name, *, dir_fd=None:
                        (_ for _ in ()).throw(PermissionError(1, "Operation not permitted")) if name == "stuck"
                        else real(name, dir_fd=dir_fd))
    with caplog.at_level(logging.WARNING, logger="d2k_env.removal"):
        removed = tempdirs.sweep(str(fast_tmp))
    assert removed == [str(first)] and not first.exists() and _intact(outside)
    assert sorted(p.name for p in second.iterdir()) == ["stuck"]
    assert "stuck: Operation not permitted" in caplog.text
