import io
import math

import pytest
import torch

from lostcities_cfr.cfr import ReservoirBuffer, reservoir_slots, surviving_slots
from lostcities_cfr.errors import ConfigError, NonFiniteError

F, A = 6, 4


def rows(start: int, stop: int) -> dict[str, torch.Tensor]:
    """Rows numbered start..stop-1; every field encodes the row number."""
    ids = torch.arange(start, stop)
    return {
        "features": ids[:, None].float().expand(-1, F) / 8,
        "legal": (ids[:, None] + torch.arange(A)) % 3 == 0,
        "targets": ids[:, None].float().expand(-1, A) - 100,
        "iteration": ids,
    }


class OneByOneReservoir:
    """Algorithm R offered one row at a time, with the uniforms given."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.slots: list[int] = []
        self.n_seen = 0

    def offer(self, row: int, uniform: float) -> None:
        k = self.n_seen
        if k < self.capacity:
            self.slots.append(row)
        else:
            j = int(uniform * (k + 1))
            if j < self.capacity:
                self.slots[j] = row
        self.n_seen += 1


def test_rows_fill_the_slots_in_order_until_full():
    buffer = ReservoirBuffer(10, F, A)
    buffer.add(**rows(0, 4))
    buffer.add(**rows(4, 7))
    assert len(buffer) == 7 and buffer.n_seen == 7
    assert torch.equal(buffer.iteration[:7], torch.arange(7, dtype=torch.int32))
    assert torch.equal(buffer.targets[:7].float(), rows(0, 7)["targets"])
    assert torch.equal(buffer.legal[:7], rows(0, 7)["legal"])


def test_slots_follow_algorithm_r():
    # Four rows seen, capacity 4: the k-th row draws j = floor(u * (k + 1)).
    uniforms = torch.tensor([0.0, 0.99, 0.5], dtype=torch.float64)
    assert reservoir_slots(torch.tensor([4, 5, 6]), 4, uniforms).tolist() == [0, -1, 3]
    # While filling, the draw is ignored.
    assert reservoir_slots(torch.tensor([0, 1, 2]), 4, uniforms).tolist() == [0, 1, 2]


def test_only_the_last_row_naming_a_slot_writes_it_the_others_the_spare_row():
    slots = surviving_slots(torch.tensor([2, -1, 2, 0, 2, -1]), spare=9)
    assert slots.tolist() == [9, 9, 9, 0, 2, 9]


@pytest.mark.parametrize("seed", range(5))
def test_batched_add_equals_one_at_a_time_with_the_same_draws(seed):
    capacity, sizes = 3, [2, 5, 50, 1, 17, 200]
    buffer = ReservoirBuffer(capacity, F, A, seed=seed)
    reference = OneByOneReservoir(capacity)
    draws = torch.Generator().manual_seed(seed)
    start = 0
    for size in sizes:
        buffer.add(**rows(start, start + size))
        # One draw per row offered, in the buffer's order (rows that fill ignore theirs).
        uniforms = torch.rand(size, generator=draws, dtype=torch.float64)
        for row, u in zip(range(start, start + size), uniforms.tolist(), strict=True):
            reference.offer(row, u)
        start += size
    assert torch.equal(buffer.generator.get_state(), draws.get_state())
    assert buffer.iteration.tolist() == reference.slots
    assert torch.equal(buffer.targets.float(), rows(0, start)["targets"][reference.slots])
    assert torch.equal(buffer.features.float(), rows(0, start)["features"][reference.slots])
    assert torch.equal(buffer.legal, rows(0, start)["legal"][reference.slots])


def test_every_row_is_kept_with_probability_capacity_over_n():
    capacity, n, runs = 100, 2000, 600
    p = capacity / n
    kept = torch.zeros(n)
    for seed in range(runs):
        buffer = ReservoirBuffer(capacity, 1, 1, seed=seed)
        g = torch.Generator().manual_seed(10_000 + seed)
        ids, start = torch.arange(n), 0
        while start < n:
            size = int(torch.randint(1, 400, (1,), generator=g))
            batch = ids[start : start + size]
            ones = torch.ones(len(batch), 1)
            buffer.add(ones, ones.bool(), ones, batch)
            start += size
        kept[buffer.iteration.long()] += 1
    assert kept.sum() == runs * capacity
    # Each row's count is Binomial(runs, p): sum of squared z-scores has mean n
    # and standard deviation about sqrt(2n).
    z = (kept - runs * p) / math.sqrt(runs * p * (1 - p))
    assert abs((z**2).sum().item() - n) < 6 * math.sqrt(2 * n)
    # Blocks of 100 consecutive rows (early vs late): each block's count is a
    # sum over runs of hypergeometric draws.
    block = 100
    block_var = runs * capacity * (block / n) * (1 - block / n) * (n - capacity) / (n - 1)
    block_counts = kept.view(-1, block).sum(1)
    assert (block_counts - runs * capacity * block / n).abs().max() < 5 * math.sqrt(block_var)


def test_sample_draws_only_rows_held_as_float32():
    buffer = ReservoirBuffer(100, F, A, seed=1)
    buffer.add(**rows(0, 10))
    batch = buffer.sample(1000)
    assert batch.features.dtype == torch.float32 and batch.targets.dtype == torch.float32
    assert batch.features.shape == (1000, F) and batch.legal.shape == (1000, A)
    assert set(batch.iteration.tolist()) == set(range(10))
    torch.testing.assert_close(batch.targets, rows(0, 10)["targets"][batch.iteration.long()])


def test_sample_with_a_given_generator_leaves_the_buffers_own_alone():
    buffer = ReservoirBuffer(100, F, A, seed=1)
    buffer.add(**rows(0, 10))
    state = buffer.generator.get_state()
    first = buffer.sample(50, generator=torch.Generator().manual_seed(3))
    second = buffer.sample(50, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first.iteration, second.iteration)
    assert torch.equal(buffer.generator.get_state(), state)


def test_sampling_an_empty_buffer_is_refused():
    with pytest.raises(ValueError, match="empty"):
        ReservoirBuffer(10, F, A).sample(4)


def test_state_dict_round_trip_continues_exactly():
    buffer = ReservoirBuffer(50, F, A, seed=7)
    buffer.add(**rows(0, 30))
    state = buffer.state_dict()
    assert state["features"].shape == (30, F)  # only the rows held
    saved = io.BytesIO()
    torch.save(state, saved)
    saved.seek(0)
    restored = ReservoirBuffer(50, F, A, seed=123)
    restored.load_state_dict(torch.load(saved))
    assert len(restored) == 30 and restored.n_seen == 30
    for b in (buffer, restored):
        b.add(**rows(30, 200))
    assert torch.equal(restored.iteration, buffer.iteration)
    assert torch.equal(restored.features, buffer.features)
    assert torch.equal(restored.sample(64).targets, buffer.sample(64).targets)


@pytest.mark.parametrize("field", ["features", "targets"])
def test_loading_a_state_with_non_finite_rows_is_refused_and_changes_nothing(field):
    buffer = ReservoirBuffer(50, F, A, seed=7)
    buffer.add(**rows(0, 30))
    state = buffer.state_dict()
    state[field][3, 0] = float("nan")  # a flipped bit in a checkpoint
    restored = ReservoirBuffer(50, F, A)
    with pytest.raises(NonFiniteError, match=f"{field} hold NaN"):
        restored.load_state_dict(state)
    assert len(restored) == 0


def test_a_full_buffers_state_shares_its_storage_and_a_partial_ones_copies_its_rows():
    buffer = ReservoirBuffer(50, F, A, seed=7)
    buffer.add(**rows(0, 30))
    partial = buffer.state_dict()["features"]
    assert partial.shape == (30, F) and partial.untyped_storage().nbytes() == 30 * F * 2
    buffer.add(**rows(30, 100))
    assert buffer.state_dict()["features"].data_ptr() == buffer.features.data_ptr()


def test_loading_a_state_of_another_capacity_is_refused():
    state = ReservoirBuffer(50, F, A).state_dict()
    with pytest.raises(ConfigError, match="capacity=50"):
        ReservoirBuffer(40, F, A).load_state_dict(state)


def test_memory_bytes_counts_the_compact_dtypes():
    buffer = ReservoirBuffer(1000, F, A)
    assert buffer.memory_bytes == 1000 * (F * 2 + A * 1 + A * 2 + 4)


def test_float16_storage_keeps_encoding_fractions_closely():
    buffer = ReservoirBuffer(10, F, A)
    features = torch.tensor([[0.1, 0.3, 0.7, 0.9, 2.0, 3.0]])
    buffer.add(
        features, torch.ones(1, A, dtype=torch.bool), torch.tensor([[-312.5, 0, 1, 0.25]]), 1
    )
    torch.testing.assert_close(buffer.features[:1].float(), features, rtol=5e-4, atol=0)
    torch.testing.assert_close(
        buffer.targets[:1].float(), torch.tensor([[-312.5, 0, 1, 0.25]]), rtol=5e-4, atol=0
    )


def test_targets_beyond_float16_are_refused_unless_stored_as_float32():
    huge = torch.full((1, A), 1e5)
    features, legal = torch.zeros(1, F), torch.ones(1, A, dtype=torch.bool)
    narrow = ReservoirBuffer(10, F, A)
    narrow.add(features, legal, huge, 1)  # refused, and said at the next check
    narrow.add(**rows(0, 3))
    assert narrow.n_seen == 3 and torch.isfinite(narrow.targets.float()).all()
    with pytest.raises(NonFiniteError, match=r"1 offered rows .*float32"):
        narrow.check_finite()
    wide = ReservoirBuffer(10, F, A, target_dtype=torch.float32)
    wide.add(features, legal, huge, 1)
    assert wide.targets[0, 0] == 1e5


def test_rows_of_the_wrong_width_are_refused():
    with pytest.raises(ValueError, match="features"):
        ReservoirBuffer(10, F, A).add(
            torch.zeros(2, F + 1), torch.zeros(2, A, dtype=torch.bool), torch.zeros(2, A), 0
        )


def held_rows(buffer: ReservoirBuffer) -> set[int]:
    """The row numbers (see ``rows``) a buffer holds, read from its exact int iterations."""
    return set(buffer.iteration[: len(buffer)].tolist())


def assert_whole_rows(buffer: ReservoirBuffer, offered: dict[str, torch.Tensor]) -> None:
    """Each slot holds one offered row whole (as stored: float16 features and targets)."""
    n, ids = len(buffer), buffer.iteration[: len(buffer)].long()
    assert torch.equal(buffer.features[:n], offered["features"][ids].half())
    assert torch.equal(buffer.legal[:n], offered["legal"][ids])
    assert torch.equal(buffer.targets[:n], offered["targets"][ids].half())


def test_a_fifo_buffer_keeps_the_newest_rows_whole():
    buffer = ReservoirBuffer(5, F, A, fifo=True)
    buffer.add(**rows(0, 4))
    buffer.add(**rows(4, 12))
    assert held_rows(buffer) == set(range(7, 12))
    assert_whole_rows(buffer, rows(0, 12))


def test_held_out_rows_go_to_the_sub_buffer_only_whole_and_at_the_holdout_rate():
    buffer = ReservoirBuffer(100_000, F, A, holdout=0.25, seed=3)
    offered = rows(0, 4000)
    buffer.add(**offered)
    held_out = buffer.held_out
    assert held_out is not None and held_out.capacity == 25_000
    # every row lands in exactly one of the two buffers, none in both
    main, held = held_rows(buffer), held_rows(held_out)
    assert main.isdisjoint(held) and main | held == set(range(4000))
    assert abs(len(held) / 4000 - 0.25) < 0.03  # binomial: sd 0.007
    assert_whole_rows(buffer, offered)
    assert_whole_rows(held_out, offered)


def test_a_holdout_leaves_the_main_buffers_draws_as_they_were():
    # Which rows are held out is drawn from the sub-buffer's generator; the main buffer draws
    # one uniform per row offered, as without holdout, and offers itself the rows left to it
    # with their own draws (Algorithm R one at a time over them).
    with_holdout = ReservoirBuffer(50, F, A, holdout=0.3, seed=5)
    held = torch.Generator().set_state(with_holdout.held_out.generator.get_state())
    draws = torch.Generator().set_state(with_holdout.generator.get_state())
    with_holdout.add(**rows(0, 400))
    kept = torch.rand(400, generator=held) >= 0.3  # [400] the rows not held out
    uniforms = torch.rand(400, generator=draws, dtype=torch.float64)
    reference = OneByOneReservoir(50)
    for row in kept.nonzero().squeeze(1).tolist():
        reference.offer(row, uniforms[row].item())
    assert with_holdout.iteration.tolist() == reference.slots
    plain = ReservoirBuffer(50, F, A, seed=5)
    plain.add(**rows(0, 400))
    assert torch.equal(plain.generator.get_state(), with_holdout.generator.get_state())
