"""Read back an offline W&B run: the records of its ``run-<id>.wandb`` file.

The file is a LevelDB-style log (W&B's "datastore"): a 7-byte header
``":W&B" | magic u16 | version u8``, then 32 KiB blocks of chunks, each with a
7-byte header ``crc32 u32 | length u16 | type u8`` (1 full, 2 first, 3 middle,
4 last) and a block tail shorter than a header padded with zeros. A record is a
``wandb_internal_pb2.Record`` protobuf. The Python SDK no longer ships a
reader, so the tests carry this one.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    ident, _, _ = HEADER.unpack_from(data)
    assert ident == b":W&B", f"{path} is not a W&B run file"
    position, pending = HEADER.size, b""
    while position + CHUNK.size <= len(data):
        left_in_block = BLOCK - position % BLOCK
        if left_in_block < CHUNK.size:
            position += left_in_block
            continue
        _, length, kind = CHUNK.unpack_from(data, position)
        if position + CHUNK.size + length > len(data):
            return  # a chunk still being written
        chunk = data[position + CHUNK.size : position + CHUNK.size + length]
        position += CHUNK.size + length
        if kind in (FULL, FIRST):
            pending = chunk
        elif kind in (MIDDLE, LAST):
            pending += chunk
        else:  # zero padding up to the end of the block
            position += left_in_block - CHUNK.size
            continue
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def run_file(save_dir: Path, timeout: float = 60.0) -> Path:
    """The one offline run's ``.wandb`` file below ``save_dir``, once it is complete.

    ``wandb.finish()`` can return before W&B's service process has written the
    file out, so this waits for the run's closing ``exit`` record.
    """
    (path,) = save_dir.glob("wandb/offline-run-*/run-*.wandb")
    deadline = time.monotonic() + timeout
    while not any(r.WhichOneof("record_type") == "exit" for r in records(path)):
        assert time.monotonic() < deadline, f"{path} has no exit record after {timeout} s"
        time.sleep(0.1)
    return path


def history(path: Path) -> list[dict[str, object]]:
    """Every ``log`` call of the run: ``{key: value}``, values decoded from JSON; nested keys
    (a table's fields) are joined with ``/``."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return rows


def metric_definitions(path: Path) -> list[wandb_internal_pb2.MetricRecord]:
    return [r.metric for r in records(path) if r.WhichOneof("record_type") == "metric"]


def config(path: Path) -> dict[str, object]:
    """The run's config as last updated: ``{top-level key: value}``."""
    values: dict[str, object] = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "config":
            for item in record.config.update:
                values[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return values
