"""Each DDP rank's training state in a shard beside the checkpoint (training/shards.py): the
files a save leaves, and a resume on another number of ranks, which keeps every row once or
refuses."""

from __future__ import annotations

import pytest
import torch

from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.errors import CheckpointError, ConfigError
from lostcities_cfr.training import shards

F, A = 3, 2


def _buffer(rows: int, capacity: int = 100, seed: int = 0) -> ReservoirBuffer:
    buffer = ReservoirBuffer(capacity, F, A, seed=seed)
    features = torch.arange(rows * F, dtype=torch.float32).view(rows, F) + 1000 * seed
    buffer.add(features, torch.ones(rows, A, dtype=torch.bool), torch.zeros(rows, A), 1)
    return buffer


def _state(rows: int, seed: int, capacity: int = 100) -> dict:
    return {
        "advantage_buffers": [_buffer(rows, capacity, seed).state_dict() for _ in range(2)],
        "strategy_buffer": _buffer(rows + 1, capacity, seed).state_dict(),
        "value_buffer": None,
        "traversal_generator": torch.Generator().manual_seed(seed).get_state(),
        "batch_generator": torch.Generator().manual_seed(seed + 1).get_state(),
    }


def _save(tmp_path, states: list[dict], step: int = 7) -> tuple:
    checkpoint = tmp_path / "iteration=3.ckpt"
    world = len(states)
    for rank, state in enumerate(states):
        name = shards.shard_name(checkpoint, rank, world, "abc")
        shards.write_shard(state, tmp_path / name, step)
    return checkpoint, shards.manifest(checkpoint, world, "abc", step)


def _features(state: dict, buffer: str = "strategy_buffer") -> torch.Tensor:
    return state[buffer]["features"]


def test_the_same_number_of_ranks_gets_each_rank_its_own_state(tmp_path):
    states = [_state(30, seed=0), _state(50, seed=1)]
    checkpoint, entry = _save(tmp_path, states)
    for rank in (0, 1):
        got = shards.rank_state(checkpoint, entry, rank, 2)
        assert torch.equal(_features(got), _features(states[rank]))
        assert torch.equal(got["traversal_generator"], states[rank]["traversal_generator"])


@pytest.mark.parametrize("world_size", [1, 3, 4])
def test_another_number_of_ranks_keeps_every_row_once(tmp_path, world_size):
    states = [_state(30, seed=0), _state(50, seed=1)]
    checkpoint, entry = _save(tmp_path, states)
    parts = [shards.rank_state(checkpoint, entry, r, world_size) for r in range(world_size)]
    for buffer in ("strategy_buffer",):
        assert torch.equal(
            torch.cat([_features(p, buffer) for p in parts]),
            torch.cat([_features(s, buffer) for s in states]),
        )
        assert sum(p[buffer]["n_seen"] for p in parts) == 30 + 1 + 50 + 1
    for p in range(2):
        rows = [part["advantage_buffers"][p]["features"] for part in parts]
        assert sum(len(r) for r in rows) == 80
    # Each part loads into a fresh buffer and goes on as a reservoir of its rows.
    buffer = ReservoirBuffer(100, F, A, seed=9)
    buffer.load_state_dict(parts[-1]["strategy_buffer"])
    assert len(buffer) == len(_features(parts[-1]))
    # Saving ranks hand on their generators; a rank they did not have keeps its own.
    for rank, part in enumerate(parts):
        expected = states[rank]["traversal_generator"] if rank < 2 else None
        assert (part["traversal_generator"] is None) == (expected is None)


def test_a_one_rank_checkpoints_state_spreads_over_two_ranks(tmp_path):
    state = _state(40, seed=0)
    parts = [shards.rank_state(tmp_path / "x.ckpt", state, r, 2) for r in (0, 1)]
    assert [len(_features(p)) for p in parts] == [20, 21]
    assert torch.equal(torch.cat([_features(p) for p in parts]), _features(state))


def test_rows_that_stand_for_several_are_not_spread(tmp_path):
    # A full reservoir (150 rows seen, 100 held): its rows' weights would change.
    states = [_state(150, seed=0), _state(50, seed=1)]
    checkpoint, entry = _save(tmp_path, states)
    with pytest.raises(ConfigError, match=r"dropped rows .* resume it on 2 ranks"):
        shards.check_resume(checkpoint, entry, 3)
    shards.check_resume(checkpoint, entry, 2)  # its own number of ranks is fine


def test_rows_that_do_not_fit_fewer_ranks_are_refused(tmp_path):
    states = [_state(60, seed=0), _state(60, seed=1)]
    checkpoint, entry = _save(tmp_path, states)
    with pytest.raises(
        ConfigError, match=r"advantage_buffers.0's 120 rows do not fit 1 buffer of 100 rows"
    ):
        shards.check_resume(checkpoint, entry, 1)


def test_a_missing_or_foreign_shard_is_named(tmp_path):
    checkpoint, entry = _save(tmp_path, [_state(5, seed=0), _state(5, seed=1)])
    shard = tmp_path / entry["shards"][1]
    shard.rename(tmp_path / "elsewhere.pt")
    with pytest.raises(CheckpointError, match=f"{shard.name}: no such file"):
        shards.rank_state(checkpoint, entry, 1, 2)
    shards.write_shard(_state(5, seed=1), shard, step=8)  # another save's
    with pytest.raises(CheckpointError, match="saved at step 8, the checkpoint at step 7"):
        shards.rank_state(checkpoint, entry, 1, 2)


def test_stale_shards_of_a_checkpoint_are_removed_and_others_kept(tmp_path):
    checkpoint = tmp_path / "epoch=1-step=[3].ckpt"
    names = [shards.shard_name(checkpoint, 0, 2, save_id) for save_id in ("old", "new")]
    other = shards.shard_name(tmp_path / "last.ckpt", 0, 2, "old")
    for name in [*names, other, shards.shard_name(checkpoint, 1, 2, "old")]:
        (tmp_path / name).touch()
    shards.remove_stale_shards(checkpoint, rank=0, keep=names[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names[1], other, shards.shard_name(checkpoint, 1, 2, "old")]
    )
