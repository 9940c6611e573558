"""Which networks each step of a training epoch updates: one after another (one rank), or
interleaved (DDP ranks, which then sync a step's networks in one all-reduce); and how many
updates and rows a rank runs under each ``rank_scaling``."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from tiny_training import tiny_model

from lostcities_cfr.training.updates import UpdateSchedule

PHASES = [[("a", 3), ("b", 1), ("c", 0)], [("b", 2)]]


def test_one_network_after_another_with_no_op_steps_to_the_phase_length():
    schedule = UpdateSchedule(PHASES, [5, 2])
    assert [schedule.networks(s) for s in range(len(schedule))] == [
        ("a",), ("a",), ("a",), ("b",), (), ("b",), ("b",),
    ]  # fmt: skip
    assert schedule.phase_starts == [0, 5]
    assert schedule.position(2) == ((2, 3),) and schedule.position(4) == ()


def test_interleaved_steps_update_every_network_with_updates_left():
    schedule = UpdateSchedule(PHASES, [4, 2], interleave=True)
    assert [schedule.networks(s) for s in range(len(schedule))] == [
        ("a", "b"), ("a",), ("a",), (), ("b",), ("b",),
    ]  # fmt: skip
    assert schedule.position(0) == ((0, 3), (0, 1))
    assert schedule.phase_starts == [0, 4]


@pytest.mark.parametrize("interleave", [False, True])
def test_both_orders_make_the_same_updates_in_each_phase(interleave):
    schedule = UpdateSchedule(PHASES, [6, 3], interleave=interleave)
    for phase, (start, stop) in enumerate([(0, 6), (6, 9)]):
        made = Counter(name for s in range(start, stop) for name in schedule.networks(s))
        assert made == Counter({name: n for name, n in PHASES[phase] if n})
        positions = sorted(p for s in range(start, stop) for p in schedule.position(s))
        assert positions == sorted((k, n) for _, n in PHASES[phase] for k in range(n))


def test_a_phase_longer_than_its_steps_is_refused():
    with pytest.raises(ValueError, match="phase of 4 steps in 3"):
        UpdateSchedule(PHASES[:1], [3])


@pytest.mark.parametrize(
    "scaling, world_size, rows, steps",
    [
        ("batch", 1, 100, 3 + 3 + 7),  # one rank: one network after another, whole batches
        ("updates", 1, 100, 3 + 3 + 7),  # ... under either rule
        ("batch", 2, 50, 7),  # the same updates, interleaved, on half the rows a rank
        ("updates", 2, 100, 4),  # half the updates (rounded up), whole batches a rank
        ("updates", 3, 100, 3),
    ],
)
def test_rank_scaling_splits_the_batch_or_the_updates(scaling, world_size, rows, steps):
    module = tiny_model(
        batch_size=100,
        advantage_updates=3,
        strategy_updates=7,
        strategy_every=1,
        value_updates=0,
        rank_scaling=scaling,
    )
    module.trainer = SimpleNamespace(world_size=world_size, current_epoch=0, max_epochs=None)
    schedule = module.update_schedule()
    assert module.rows_per_update() == rows
    assert len(schedule) == steps
    made = Counter(name for s in range(len(schedule)) for name in schedule.networks(s))
    share = world_size if scaling == "updates" else 1
    assert made == {"advantage_p0": -(-3 // share), "advantage_p1": -(-3 // share),
                    "strategy": -(-7 // share)}  # fmt: skip
