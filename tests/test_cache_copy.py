"""A warm worker's Triton cache travels by copy (d2k_env.evaluator.cache_copy): what comes back from
the untrusted worker is plain directories and files only, bounded, never over an existing entry."""

from __future__ import annotations

import os

from d2k_env.evaluator import cache_copy
from d2k_env.evaluator.cache_copy import harvest_cache, seed_cache


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
