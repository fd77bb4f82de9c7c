"""Reads what an offline wandb run wrote: the records of its ``run-<id>.wandb`` file.

The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of chunks (4-byte CRC, 2-byte
length, 1-byte type: full, first, middle, last), each record a serialized ``wandb.proto`` Record.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb log"
    out, pos, parts = [], HEADER, []
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # block trailer padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        parts.append(chunk)
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            out.append(record)
            parts = []
    return out


def history(path: Path) -> list[dict]:
    """Every ``run.log`` call, as a dict of decoded values."""
    rows = []
    for r in records(path):
        if r.WhichOneof("record_type") == "history":
            rows.append({"/".join(i.nested_key) if i.nested_key else i.key: json.loads(i.value_json)
                         for i in r.history.item})
    return rows


def config(path: Path) -> dict:
    """The run's config: set at ``wandb.init`` (the run record) or updated later."""
    found = {}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        items = r.run.config.update if kind == "run" else r.config.update if kind == "config" else []
        for item in items:
            found[item.key] = json.loads(item.value_json)
    return found


def summary(path: Path) -> dict:
    found = {}
    for r in records(path):
        if r.WhichOneof("record_type") == "summary":
            for item in r.summary.update:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                found[key] = json.loads(item.value_json)
    return found


def run(path: Path) -> dict:
    """The run record's group and tags."""
    for r in records(path):
        if r.WhichOneof("record_type") == "run":
            return {"group": r.run.run_group, "tags": list(r.run.tags)}
    raise AssertionError(f"{path} has no run record")
