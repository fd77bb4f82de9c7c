"""Nothing a solution leaves hurts later evaluations or processes (issue 24, part 2; THREATS.md row 23).

A red team planted a 1500-level directory in a worker's Triton cache: ``shutil.rmtree`` raised
``RecursionError`` (Python 3.11 and 3.12, even with ``ignore_errors``) in the cache harvest, in
``Worker.close()`` and in every later process's temp sweep, so every new process failed at its first
``reset()``; 20,000 empty directories in an env's Triton cache made its next honest submit take 185 s
against 4.3 s. Here the remover (d2k_env.removal) and the sweep meet such trees (10,000 levels,
100,000 entries, 20,000 empty directories, directories without permissions, links to outside, a
file that cannot be removed), and a solution past the policy leaves them in every directory it can
write: nothing of them remains, and the honest reference scores as before, in the same env and in
a fresh process. The cache's admission of what a worker leaves is tested in tests/test_cache_copy.py.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import hostile_trees
from d2k_env import removal, tempdirs
from d2k_env.evaluator import Evaluator, PhaseLimits, cache_copy
from d2k_env.task import load_task
from hostile_trees import chain, links, locked, many, plant

PROJECT = Path(__file__).resolve().parents[1]


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


# -- a solution past the policy leaves them everywhere it can write --------------------------------------

TASK = "fused_add_rmsnorm"
# Module code run by the solution worker at import (the policy is off, as for an escaped solution):
# the trees in its scratch (its working directory, HOME and TMPDIR), its Triton cache and its outputs.
# Chains 1500 deep: Landlock checks each access against every directory above it, so a chain costs
# the worker the square of its depth (10,000 levels took it 90 s); the test plants those itself, below.
ESCAPE = """
import os as _os

for _root, _plan in ((_os.getcwd(), {}),
                     (_os.environ["TRITON_CACHE_DIR"], dict(empties=20_000)),
                     (_os.path.join(_os.getcwd(), "..", "outputs"), {})):
    try:
        plant(_root, @OUTSIDE@, depths=(1500,), **_plan)
    except OSError as _exc:  # the sandbox refused: nothing more to leave there
        print("PLANT REFUSED", _root, _exc)
# A cache entry of Triton's shape but for a deep chain inside: its file may come back, the chain never.
_entry = _os.path.join(_os.environ["TRITON_CACHE_DIR"], "PLANTEDKEY")
_os.mkdir(_entry)
with open(_os.path.join(_entry, "k.json"), "w") as _f:
    _f.write("{}")
chain(_entry, 1500)
"""

FRESH_PROCESS = """
import json, sys, time
from d2k_env.evaluator import Evaluator, PhaseLimits
from d2k_env.task import load_task
task = load_task(sys.argv[1])
ev = Evaluator(task, "interpreter", cache_dir=sys.argv[2], limits=PhaseLimits(default=120))
started = time.monotonic()
result = ev.evaluate(task.reference_path)
print(json.dumps({"correct": result.correct, "error": result.error, "seconds": time.monotonic() - started}))
ev.close()
"""


def _timed(ev: Evaluator, path) -> tuple[object, float]:
    started = time.monotonic()
    result = ev.evaluate(path)
    return result, time.monotonic() - started


def test_an_escaped_solution_leaves_nothing_that_outlives_it_or_slows_the_next_evaluation(tmp_path, fast_tmp,
                                                                                           outside, monkeypatch):
    temp = fast_tmp  # the workers' directories, apart from other processes' on the machine
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    task = load_task(TASK)
    ev = Evaluator(task, "interpreter", cache_dir=tmp_path / "cache", limits=PhaseLimits(default=120))
    try:
        before, seconds_before = _timed(ev, task.reference_path)
        assert before.correct, before.error

        solution = tmp_path / "solution.py"
        solution.write_text(task.reference_path.read_text() + inspect.getsource(hostile_trees)
                            + ESCAPE.replace("@OUTSIDE@", repr(str(outside))))
        with monkeypatch.context() as policy_off:
            policy_off.setattr("d2k_env.evaluator.check_solution", lambda source, allowed: [])
            attacked = ev.evaluate(solution)
        assert "PLANT REFUSED" not in attacked.output, attacked.output  # every tree was planted
        assert not list(temp.glob("d2k-eval-*")), f"a worker's directory outlived it: {list(temp.iterdir())}"
        assert _intact(outside)
        cache = [entry for side in (tmp_path / "cache").iterdir() for entry in side.iterdir()]  # solution/, trusted/
        assert len(cache) <= cache_copy.HARVEST_ENTRIES, len(cache)
        for entry in cache:  # what was admitted has Triton's layout: directories of plain files
            assert entry.is_dir() and not entry.is_symlink(), entry
            assert all(p.is_file() and not p.is_symlink() for p in entry.iterdir()), entry

        after, seconds_after = _timed(ev, task.reference_path)
        assert after.correct, after.error
        # Not a timing test (the machine may be loaded): a 40x slowdown, as before, fails it.
        assert seconds_after < 5 * seconds_before + 20, (seconds_before, seconds_after)
    finally:
        ev.close()

    # A fresh process, after an env that was killed left a worker's directory full of the trees.
    left = _dead_owners_directory(temp)
    plant(left, outside, depths=(1500, 10_000), empties=2000)
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, TASK, str(tmp_path / "cache")], cwd=PROJECT,
                          env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(PROJECT)},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    assert fresh["correct"], fresh["error"]
    assert fresh["seconds"] < 5 * seconds_before + 60, (seconds_before, fresh["seconds"])
    assert not os.path.lexists(left) and _intact(outside)
    assert not list(temp.glob("d2k-eval-*")), list(temp.iterdir())
