"""ESCHER's walk reads the counts of each step once: the same rows as the reference walk
(``escher_reference.py``, a host synchronisation wherever a count was needed), and one host
read per step."""

from __future__ import annotations

import collections

import pytest
import torch
from escher_reference import ReferenceESCHER
from torch.profiler import ProfilerActivity, profile

from lostcities_cfr.cfr.escher import VALUE_NETWORK, ESCHERSampling
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.cfr.regret_matching import regret_matching
from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.cfr.traversal import (
    ADVANTAGE_NETWORKS,
    STRATEGY_NETWORK,
    TraversalContext,
    static_rows,
)
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.game.encoding import history_feature_size
from lostcities_cfr.inference import InferenceQueue

CLASSIC = Rules.classic()
SYNC_OPS = ("aten::nonzero", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::item")


def classic_context(traverser: int, holdout: float = 0.0) -> TraversalContext:
    """Small colour networks (seeded) in a queue, and buffers that keep every row."""
    torch.manual_seed(0)
    small = NetworkConfig(width=16, depth=2, architecture="colors")
    F, H, A = feature_size(CLASSIC), history_feature_size(CLASSIC), CLASSIC.n_actions
    queue = InferenceQueue(bucket_sizes=None)
    for name in ADVANTAGE_NETWORKS:
        queue.register(name, small.build(F, A, CLASSIC), regret_matching)
    queue.register(STRATEGY_NETWORK, small.build(F, A, CLASSIC), masked_softmax)
    queue.register(VALUE_NETWORK, small.build(H, 1, CLASSIC))
    return TraversalContext(
        game=CLASSIC,
        traverser=traverser,
        iteration=3,
        queue=queue,
        advantage_buffer=ReservoirBuffer(50_000, F, A, seed=1, holdout=holdout),
        strategy_buffer=ReservoirBuffer(50_000, F, A, seed=2, holdout=holdout),
        generator=torch.Generator().manual_seed(4),
        value_buffer=ReservoirBuffer(
            50_000, H, 1, seed=3, target_dtype=torch.float32, fifo=True, holdout=holdout
        ),
    )


def walked(sampler: ESCHERSampling, traverser: int, games: GameBatch) -> TraversalContext:
    context = classic_context(traverser)
    with torch.no_grad():
        sampler.traverse_games(games, context)
    return context


@pytest.mark.parametrize(
    ("traverser", "td_lambda", "max_decisions"),
    [(0, 1.0, 60), (1, 1.0, 300), (0, 0.5, 40)],
)
def test_the_walk_writes_the_reference_walks_rows(traverser, td_lambda, max_decisions):
    # Short cuts and few walkers: trajectories are cut, end and get compacted away.
    options = {"walkers": 24, "td_lambda": td_lambda, "max_decisions": max_decisions}
    games = GameBatch.new(CLASSIC, 24, seed=7)
    new = walked(ESCHERSampling(**options), traverser, games)
    old = walked(ReferenceESCHER(**options), traverser, games)
    assert new.stats.nodes == old.stats.nodes > 0
    assert new.stats.truncated == old.stats.truncated
    assert new.stats.advantage_rows == old.stats.advantage_rows > 0
    assert new.stats.strategy_rows == old.stats.strategy_rows > 0
    assert new.stats.value_rows == old.stats.value_rows > 0
    if max_decisions < 100:
        assert new.stats.truncated > 0  # cut trajectories were exercised
    for name in ("advantage_buffer", "strategy_buffer", "value_buffer"):
        a, b = getattr(new, name), getattr(old, name)
        assert a.n_seen == b.n_seen
        for field in ("features", "legal", "targets", "iteration"):
            assert torch.equal(getattr(a, field), getattr(b, field)), (name, field)
    assert torch.equal(new.generator.get_state(), old.generator.get_state())


def test_each_step_reads_the_device_once_and_synchronises_nowhere_else():
    sampler = ESCHERSampling(walkers=16, max_decisions=80)
    context = classic_context(0, holdout=0.1)
    games = GameBatch.new(CLASSIC, 16, seed=3)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        sampler.traverse_games(games, context)
    calls = collections.Counter(e.name for e in prof.events())
    assert context.stats.steps > 40
    # One read per step, and one more: the read that finds every trajectory ended.
    assert context.stats.host_reads == context.stats.steps + 1
    assert {name: calls[name] for name in SYNC_OPS} == dict.fromkeys(SYNC_OPS, 0)
    for buffer in (context.advantage_buffer, context.strategy_buffer, context.value_buffer):
        assert buffer.n_seen > 0 and buffer.held_out.n_seen > 0


@pytest.mark.slow  # 80 s of compiling; tests/game/test_fused.py keeps the compiled engine in the default run
def test_the_walk_on_compiled_kernels_writes_the_eager_walks_rows():
    # The engine, the guide, the history features and the step's masks compiled
    # (game/fused.py): the same rows, bit for bit, and the same draws.
    options = {"walkers": 24, "td_lambda": 0.5, "max_decisions": 40}
    eager = walked(ESCHERSampling(**options), 0, GameBatch.new(CLASSIC, 24, seed=7))
    fused = walked(
        ESCHERSampling(**options), 0, GameBatch.new(CLASSIC, 24, seed=7, kernels="compiled")
    )
    assert fused.stats.nodes == eager.stats.nodes > 0
    assert fused.stats.truncated == eager.stats.truncated > 0
    for name in ("advantage_buffer", "strategy_buffer", "value_buffer"):
        a, b = getattr(fused, name), getattr(eager, name)
        assert a.n_seen == b.n_seen > 0
        for field in ("features", "legal", "targets", "iteration"):
            assert torch.equal(getattr(a, field), getattr(b, field)), (name, field)
    assert torch.equal(fused.generator.get_state(), eager.generator.get_state())


def test_compiled_static_rows_are_nonzero_static_rows():
    generator = torch.Generator().manual_seed(0)
    for size in (1, 2, 7, 64, 300):
        some = torch.rand(size, generator=generator) < 0.4
        for mask in (some, torch.zeros(size, dtype=torch.bool), torch.ones(size, dtype=torch.bool)):
            count = int(mask.sum())
            assert torch.equal(static_rows(mask, count, compiled=True), static_rows(mask, count))
