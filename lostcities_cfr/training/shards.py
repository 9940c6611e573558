"""Every DDP rank's training state (reservoirs, generators) in a file of its own beside the
checkpoint, and a resume that gives each rank its rows back.

Each rank of a data-parallel run walks its own games into its own reservoirs, so a
checkpoint that held rank 0's state alone would resume every rank from rank 0's rows and
lose the others'. Lightning writes the checkpoint from rank 0 only; gathering every rank's
rows there would hold all of them in one process. Instead each rank writes its own shard,
``<checkpoint name>.rank<r>of<W>.<save id>.pt`` beside the checkpoint file, and the
checkpoint keeps a manifest (:func:`manifest`) naming them. Files on a disk each node sees
(a cluster's shared file system) or each node's own disk at the same path both work: a rank
reads and removes its own shard only, unless a resume on another number of ranks has to
redistribute the rows.

Order of a save, so that a run killed at any moment leaves a checkpoint whose shards exist:
every rank writes its shard under a fresh save id (hidden file, then rename), then rank 0
writes the checkpoint (atomic, ``StreamingCheckpointIO``), then each rank removes its shards
of that checkpoint name with another save id. One-rank runs keep their state inside the
checkpoint, as before.

A resume on the number of ranks that saved gives each rank its own shard. On another
number it redistributes when that is exact, and refuses otherwise (:func:`check_resume`):
a reservoir that has dropped rows holds a uniform sample in which each row stands for
``n_seen / held`` offered ones, and split over other ranks those rows would no longer be a
reservoir's state (rows held below capacity while more were seen), so their sampling weight
would change. Reservoirs that never dropped a row (each row stands for itself) are split
into contiguous parts, every row kept once.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from lostcities_cfr.errors import CheckpointError, ConfigError

SHARDS_KEY = "shards"  # in the model's training state entry: the manifest's mark


def shard_name(checkpoint: str | Path, rank: int, world_size: int, save_id: str) -> str:
    """The file name of ``rank``'s shard of the checkpoint named ``checkpoint``."""
    return f"{Path(checkpoint).name}.rank{rank}of{world_size}.{save_id}.pt"


def new_save_id() -> str:
    """An id for one save, unique among the saves of a run (rank 0's clock, broadcast)."""
    return f"{time.time_ns():x}"


def manifest(checkpoint: str | Path, world_size: int, save_id: str, step: int) -> dict[str, Any]:
    """What the checkpoint holds in place of the ranks' states: their shards' names (beside
    the checkpoint file), the number of ranks and the global step they were saved at."""
    names = [shard_name(checkpoint, r, world_size, save_id) for r in range(world_size)]
    return {SHARDS_KEY: names, "world_size": world_size, "global_step": step}


def is_manifest(state: dict[str, Any] | None) -> bool:
    """Whether a checkpoint's training state entry is a manifest of shards."""
    return isinstance(state, dict) and SHARDS_KEY in state


def write_shard(state: dict[str, Any], path: Path, step: int) -> None:
    """Write one rank's ``state`` to ``path``: a hidden file renamed once complete, so that a
    killed save leaves no truncated shard under the name a manifest gives."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save({"global_step": step, "state": state}, partial)
    os.replace(partial, path)


def remove_stale_shards(checkpoint: str | Path, rank: int, keep: str | None = None) -> None:
    """Remove ``rank``'s shards of the checkpoint named ``checkpoint`` but the one named
    ``keep`` (all of them when None: the checkpoint itself was removed)."""
    checkpoint = Path(checkpoint)
    for path in checkpoint.parent.glob(f"{glob.escape(checkpoint.name)}.rank{rank}of*.pt"):
        if path.name != keep:
            path.unlink(missing_ok=True)


def read_shard(folder: Path, name: str, step: int) -> dict[str, Any]:
    """One rank's state from the shard ``name`` in ``folder`` (memory-mapped: slicing it
    reads only the rows sliced), checked to belong to the checkpoint of ``step``."""
    path = folder / name
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint shard {path}: no such file; a DDP checkpoint keeps each rank's "
            "reservoirs beside it, and a resume needs every one of them (copy them with the "
            "checkpoint)"
        )
    try:
        shard = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # a damaged file raises many kinds; each is one answer
        raise CheckpointError(
            f"checkpoint shard {path}: not readable, truncated or corrupted "
            f"({type(error).__name__})"
        ) from None
    if shard.get("global_step") != step:
        raise CheckpointError(
            f"checkpoint shard {path}: saved at step {shard.get('global_step')}, the "
            f"checkpoint at step {step}; they belong to different saves"
        )
    return shard["state"]


def rank_state(
    checkpoint_path: str | Path, entry: dict[str, Any], rank: int, world_size: int
) -> dict[str, Any] | None:
    """The training state rank ``rank`` of ``world_size`` resumes from.

    ``entry`` is the checkpoint's training state: a manifest of shards, or (a one-rank run)
    the state itself. Returns the state for this rank, whose generators are ``None`` where
    a rank that did not exist when saving keeps its own; the rows redistributed when the
    number of ranks changed (:func:`check_resume` says when that is possible).

    Raises:
        ConfigError: another number of ranks and rows that cannot be redistributed exactly.
        CheckpointError: a missing, unreadable or mismatched shard.
    """
    saved = _saved_ranks(entry)
    if saved == world_size:  # this rank's own shard, and no other rank's file
        return _source(checkpoint_path, entry, rank)
    sources = [_source(checkpoint_path, entry, r) for r in range(saved)]
    check_redistributable(checkpoint_path, sources, world_size)
    return _redistributed(sources, rank, world_size)


def check_resume(
    checkpoint_path: str | Path, entry: dict[str, Any] | None, world_size: int
) -> None:
    """Refuse, before a run starts, a resume on another number of ranks whose rows cannot
    reach ``world_size`` ranks (or whose shards are missing or foreign). On the saving
    number of ranks each rank reads its own shard as it starts: on hosts that each keep
    their own, no one process sees them all."""
    if entry is None or _saved_ranks(entry) == world_size:
        return
    sources = [_source(checkpoint_path, entry, r) for r in range(_saved_ranks(entry))]
    check_redistributable(checkpoint_path, sources, world_size)


def _saved_ranks(entry: dict[str, Any]) -> int:
    """The number of ranks that saved a checkpoint's training state."""
    return entry["world_size"] if is_manifest(entry) else 1


def _source(checkpoint_path: str | Path, entry: dict[str, Any], rank: int) -> dict[str, Any]:
    """Saving rank ``rank``'s state (its shard memory-mapped; a one-rank run's in the file)."""
    if not is_manifest(entry):
        return entry
    folder = Path(checkpoint_path).resolve().parent  # last.ckpt links to the saved file
    return read_shard(folder, entry[SHARDS_KEY][rank], entry["global_step"])


def check_redistributable(
    checkpoint_path: str | Path, sources: Sequence[dict[str, Any]], world_size: int
) -> None:
    """Refuse to spread ``sources``' rows over ``world_size`` ranks unless every row can be
    kept once with its sampling weight (module docstring)."""
    saved = len(sources)
    how = (
        f"resume it on {saved} rank{'s' if saved > 1 else ''} (--trainer.devices and "
        "--trainer.num_nodes), which gives each rank its own rows back"
    )
    for name, buffers in _buffer_columns(sources):
        for buffer in buffers:
            held = buffer["features"].shape[0]
            if buffer["n_seen"] != held:
                raise ConfigError(
                    f"ckpt_path={checkpoint_path}: saved by {saved} rank(s), resumed on "
                    f"{world_size}; buffer {name} has dropped rows (it saw {buffer['n_seen']} "
                    f"and holds {held}), and rows that each stand for several cannot be "
                    f"spread over other ranks with their weights; {how}"
                )
        total = sum(b["features"].shape[0] for b in buffers)
        capacity = buffers[0]["capacity"]
        if -(-total // world_size) > capacity:
            raise ConfigError(
                f"ckpt_path={checkpoint_path}: saved by {saved} rank(s), resumed on "
                f"{world_size}; buffer {name}'s {total} rows do not fit {world_size} "
                f"buffer{'s' if world_size > 1 else ''} of {capacity} rows; {how}"
            )


def _buffer_columns(sources: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each buffer (held-out ones included) with its state on every source rank."""
    entries = [dict(_buffer_entries(source)) for source in sources]
    columns = []
    for key in entries[0]:
        column = [buffers[key] for buffers in entries]
        columns.append((key, column))
        while column[0].get("held_out") is not None:
            key, column = f"{key}.held_out", [b["held_out"] for b in column]
            columns.append((key, column))
    return columns


def _is_buffer(value: Any) -> bool:
    """Whether a rank state's entry is a buffer's state."""
    return isinstance(value, dict) and "capacity" in value


def _is_buffer_list(value: Any) -> bool:
    """Whether a rank state's entry is a list of buffers' states (one per player)."""
    return isinstance(value, list) and bool(value) and _is_buffer(value[0])


def _buffer_entries(state: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A rank state's buffer states by name (``advantage_buffers.0``, ``strategy_buffer``...)."""
    entries = []
    for key, value in state.items():
        if _is_buffer_list(value):
            entries += [(f"{key}.{i}", v) for i, v in enumerate(value)]
        elif _is_buffer(value):
            entries.append((key, value))
    return entries


def _redistributed(sources: Sequence[dict[str, Any]], rank: int, world_size: int) -> dict[str, Any]:
    """Rank ``rank``'s part of every buffer's rows (the sources' rows in rank order, cut into
    ``world_size`` contiguous parts), with saving rank ``rank``'s generators if there was one."""
    own = sources[rank] if rank < len(sources) else None
    state: dict[str, Any] = {}
    for key, value in sources[0].items():
        if _is_buffer_list(value):
            state[key] = [
                _split_buffer([s[key][i] for s in sources], own and own[key][i], rank, world_size)
                for i in range(len(value))
            ]
        elif _is_buffer(value):
            state[key] = _split_buffer(
                [s[key] for s in sources], own and own[key], rank, world_size
            )
        elif value is None:
            state[key] = None
        else:  # generators and RNG states: the saving rank's own, or the new rank's fresh ones
            state[key] = own[key] if own is not None else None
    return state


def _split_buffer(
    column: Sequence[dict[str, Any]], own: dict[str, Any] | None, rank: int, world_size: int
) -> dict[str, Any]:
    """Rows ``[rank * total / W, (rank + 1) * total / W)`` of the column's rows in order."""
    total = sum(b["features"].shape[0] for b in column)
    start, stop = rank * total // world_size, (rank + 1) * total // world_size
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("features", "legal", "targets")}
    parts["iteration"] = []
    offset = 0
    for buffer in column:
        held = buffer["features"].shape[0]
        lo, hi = max(start - offset, 0), min(stop - offset, held)
        if lo < hi:
            for name, kept in parts.items():
                kept.append(buffer[name][lo:hi])
        offset += held
    rows = {name: torch.cat(kept) if kept else column[0][name][:0] for name, kept in parts.items()}
    held_out = None
    if column[0].get("held_out") is not None:
        held_out = _split_buffer(
            [b["held_out"] for b in column],
            own and own.get("held_out"),
            rank,
            world_size,
        )
    return {
        "capacity": column[0]["capacity"],
        "n_seen": stop - start,
        **rows,
        "generator": None if own is None else own["generator"],
        "held_out": held_out,
    }
