"""Which networks each step of a training epoch updates: one after another (one rank), or
interleaved (DDP ranks, which then sync a step's networks in one all-reduce)."""

from __future__ import annotations

from collections import Counter

import pytest

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
