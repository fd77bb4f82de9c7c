"""A warm worker's Triton cache travels by copy (d2k_env.evaluator.cache_copy): what comes back from
the untrusted worker is Triton's layout only (entry directories of plain files), bounded in entries,
files and bytes, never over an existing entry, and found without walking past a limit whatever tree
the worker left (tests/test_hostile_trees.py plays the worker that leaves them)."""

from __future__ import annotations

import os

import pytest

from d2k_env.evaluator import cache_copy
from d2k_env.evaluator.cache_copy import harvest_cache, seed_cache
from d2k_env.removal import remove_tree
from hostile_trees import chain, many


def _entry(root, name, files):
    (root / name).mkdir(parents=True)
    for file, data in files.items():
        (root / name / file).write_bytes(data)


def test_seed_copies_every_entry_and_harvest_brings_back_only_new_ones(tmp_path):
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    worker.mkdir()
    _entry(cache, "aaa", {"k.json": b"{}", "k.cubin": b"\x7fELF"})
    seed_cache(cache, worker)
    assert (worker / "aaa" / "k.cubin").read_bytes() == b"\x7fELF"
    (worker / "aaa" / "k.cubin").write_bytes(b"poisoned")  # an existing entry changed by the worker
    _entry(worker, "bbb", {"k.json": b"{1}"})
    assert harvest_cache(worker, cache) == 3
    assert (cache / "aaa" / "k.cubin").read_bytes() == b"\x7fELF", "an existing entry was overwritten"
    assert (cache / "bbb" / "k.json").read_bytes() == b"{1}"
    assert not [p for p in cache.iterdir() if p.name.startswith(".")], "a partial entry was left"


def test_links_and_special_files_never_come_back(tmp_path):
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    secret = tmp_path / "secret.py"
    secret.write_text("the reference")
    _entry(worker, "ccc", {"k.json": b"{}"})
    os.symlink(secret, worker / "ccc" / "k.cubin")  # a link the worker planted, naming a file it cannot read
    os.symlink(tmp_path, worker / "ddd")  # a top-level entry that is a link to a directory
    os.mkfifo(worker / "ccc" / "pipe")
    harvest_cache(worker, cache)
    assert sorted(p.name for p in (cache / "ccc").iterdir()) == ["k.json"]
    assert not (cache / "ddd").exists()
    assert "the reference" not in "".join(p.read_text() for p in cache.rglob("*") if p.is_file())


def test_harvest_is_bounded_and_an_entry_over_the_bound_is_left_out_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_copy, "HARVEST_LIMIT_BYTES", 100)
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    _entry(worker, "a_small", {"x": b"1" * 40})
    _entry(worker, "b_large", {"x": b"2" * 40, "y": b"3" * 40})  # 80 more: past the bound
    _entry(worker, "c_small", {"x": b"4" * 50})
    assert harvest_cache(worker, cache) == 90
    assert sorted(p.name for p in cache.iterdir()) == ["a_small", "c_small"]


def test_group_files_point_into_each_copy_and_nowhere_else(tmp_path):
    """Triton finds a compiled kernel through a group file of absolute paths: copied as is, it would
    name the first worker's (removed) directory, and every later worker would compile again."""
    import json
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    first = tmp_path / "first-worker" / "KEY"
    _entry(worker, "KEY", {"k.cubin": b"\x7fELF",
                           "__grp__k.json": json.dumps({"child_paths": {
                               "k.cubin": str(first / "k.cubin"), "evil": "/etc/../root/x", "bad": 3}}).encode()})
    harvest_cache(worker, cache)
    assert json.loads((cache / "KEY" / "__grp__k.json").read_text())["child_paths"] == {
        "k.cubin": str(cache / "KEY" / "k.cubin"), "evil": str(cache / "KEY" / "x")}
    again = tmp_path / "again"
    again.mkdir()
    seed_cache(cache, again)
    assert json.loads((again / "KEY" / "__grp__k.json").read_text())["child_paths"]["k.cubin"] == \
        str(again / "KEY" / "k.cubin")
    _entry(worker, "BAD", {"__grp__x.json": b"not json"})
    harvest_cache(worker, cache)
    assert not (cache / "BAD" / "__grp__x.json").exists()


def _names(directory):
    return sorted(p.name for p in directory.iterdir())


def test_only_triton_layout_is_admitted_and_nothing_below_an_entry_is_walked(tmp_path, monkeypatch):
    """An entry is a directory of plain files: a subdirectory in it (Triton's own tmp.pid_* of a cut
    write, or a 1500-level chain) is never entered, and what holds no file, or too many names, or
    is left out whole; so is anything directly in the cache that is not a directory."""
    monkeypatch.setattr(cache_copy, "FILES_PER_ENTRY", 8)
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    _entry(worker, "DEEP", {"k.json": b"{}"})
    chain(worker / "DEEP", 1500)  # listed once, as a name; never entered
    _entry(worker, "NESTED", {"k.cubin": b"\x7fELF"})
    _entry(worker / "NESTED", "tmp.pid_1_2", {"k.cubin": b"half-written"})
    (worker / "EMPTY").mkdir()
    _entry(worker, "ONLYDIRS", {})
    many(worker / "ONLYDIRS", 3)
    _entry(worker, "CROWDED", {f"f{i}": b"x" for i in range(9)})  # past FILES_PER_ENTRY names
    (worker / "toplevel.so").write_bytes(b"a file beside the entries")
    _entry(worker, ".hidden", {"k.json": b"{}"})
    try:
        harvest_cache(worker, cache)
    finally:
        remove_tree(worker / "DEEP")  # pytest's removal of old temporary directories recurses
    assert _names(cache) == ["DEEP", "NESTED"]
    assert _names(cache / "DEEP") == ["k.json"] and _names(cache / "NESTED") == ["k.cubin"]
    assert (cache / "NESTED" / "k.cubin").read_bytes() == b"\x7fELF"


def test_twenty_thousand_empty_directories_add_nothing_and_are_listed_only_to_the_limit(tmp_path, monkeypatch):
    """The attack that made an honest submit take 185 s: 20,000 empty directories in the worker's
    cache, each copied into every later worker. None is an entry; no more names are read than the
    limit, and so no more are looked at."""
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    worker.mkdir()
    many(worker, 20_000)
    looked = []
    real = cache_copy._is_entry
    monkeypatch.setattr(cache_copy, "_is_entry", lambda entry: looked.append(entry.name) or real(entry))
    assert harvest_cache(worker, cache) == 0
    assert _names(cache) == []
    assert len(looked) <= cache_copy.LISTED_NAMES + 1, len(looked)
    listed, complete = cache_copy._listing(worker)
    assert len(listed) == cache_copy.LISTED_NAMES and not complete


def test_one_evaluation_adds_at_most_its_entries_and_a_full_cache_admits_none(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_copy, "HARVEST_ENTRIES", 3)
    monkeypatch.setattr(cache_copy, "ENTRY_LIMIT", 5)
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    for i in range(4):
        _entry(worker, f"A{i}", {"k.json": b"{}"})
    harvest_cache(worker, cache)
    assert _names(cache) == ["A0", "A1", "A2"]  # three per evaluation
    for i in range(4):
        _entry(worker, f"B{i}", {"k.json": b"{}"})
    harvest_cache(worker, cache)
    assert len(_names(cache)) == 5  # then full
    _entry(worker, "C0", {"k.json": b"{}"})
    assert harvest_cache(worker, cache) == 0 and "C0" not in _names(cache)


def test_the_cache_is_bounded_in_bytes_and_the_seed_copies_within_the_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_copy, "CACHE_LIMIT_BYTES", 100)
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    _entry(worker, "A", {"x": b"1" * 60})
    _entry(worker, "B", {"x": b"2" * 60})  # past the cache's bytes
    _entry(worker, "C", {"x": b"3" * 30})
    assert harvest_cache(worker, cache) == 90
    assert _names(cache) == ["A", "C"]
    _entry(worker, "D", {"x": b"4" * 5})
    assert harvest_cache(worker, cache) == 5  # 95 of 100
    monkeypatch.setattr(cache_copy, "ENTRY_LIMIT", 2)  # a cache the caller named, holding more
    seeded = tmp_path / "seeded"
    seeded.mkdir()
    seed_cache(cache, seeded)
    assert len(_names(seeded)) == 2


def test_a_group_file_cannot_grow_past_the_bytes_left(tmp_path, monkeypatch):
    """Its paths are rewritten into the copy's directory: a file of many one-letter paths would grow
    tenfold. What it grows to counts."""
    import json
    monkeypatch.setattr(cache_copy, "HARVEST_LIMIT_BYTES", 4000)
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    children = {str(i): "a" for i in range(200)}
    _entry(worker, "GROUP", {"__grp__k.json": json.dumps({"child_paths": children}).encode()})
    assert len((worker / "GROUP" / "__grp__k.json").read_bytes()) < 4000
    assert harvest_cache(worker, cache) == 0 and _names(cache) == []


@pytest.mark.parametrize("made", ["nothing", "a file", "a link"])
def test_a_worker_cache_that_is_no_directory_brings_nothing_back_and_raises_nothing(tmp_path, made):
    """The worker may chmod its cache, or (with its directory's write permission) replace it."""
    cache, worker = tmp_path / "cache", tmp_path / "worker"
    _entry(tmp_path, "elsewhere", {"A": b""})
    _entry(tmp_path / "elsewhere", "B", {"k.json": b"{}"})
    if made == "a file":
        worker.write_text("x")
    elif made == "a link":
        worker.symlink_to(tmp_path / "elsewhere")
    assert harvest_cache(worker, cache) == 0 and _names(cache) == []
