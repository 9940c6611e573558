"""A sampler written outside the package: one ``walk``, then DeepCFR trains with it."""

import pytest
import torch
from my_extensions import OnPolicySampling, TwoLayerNet
from tiny_training import fit, tiny_model

from lostcities_cfr.cfr import ReservoirBuffer, TraversalContext
from lostcities_cfr.cfr.regret_matching import regret_matching
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.inference import InferenceQueue

TINY = Rules.tiny()
F, A = feature_size(TINY), TINY.n_actions


def tiny_context(iteration: int = 3) -> TraversalContext:
    """Player 0's traversal epoch on tiny rules: two random advantage networks in a queue."""
    torch.manual_seed(0)
    queue = InferenceQueue(bucket_sizes=None)
    for name in ADVANTAGE_NETWORKS:
        queue.register(name, TwoLayerNet(F, A), regret_matching)
    return TraversalContext(
        game=TINY,
        traverser=0,
        iteration=iteration,
        queue=queue,
        advantage_buffer=ReservoirBuffer(10_000, F, A, target_dtype=torch.float32),
        strategy_buffer=ReservoirBuffer(10_000, F, A),
        generator=torch.Generator().manual_seed(1),
    )


def test_its_walk_writes_rows_through_the_context_and_the_base_class_counts_them():
    context = tiny_context()
    stats = OnPolicySampling(walkers=8).traverse(context, 20)
    assert stats.traversals == 20
    assert stats.nodes == context.queue.stats().rows > 0  # every node asked the queue once
    assert stats.advantage_rows == len(context.advantage_buffer) > 0
    assert stats.strategy_rows == len(context.strategy_buffer) > 0
    # every decision of a walk is either the traverser's or the opponent's row
    assert stats.advantage_rows + stats.strategy_rows == stats.nodes
    assert stats.seconds > 0
    assert (context.advantage_buffer.iteration[: stats.advantage_rows] == 3).all()
    legal = context.advantage_buffer.legal[: stats.advantage_rows]
    targets = context.advantage_buffer.targets[: stats.advantage_rows]
    assert (targets[~legal] == 0).all() and targets.abs().sum() > 0


def test_the_same_seed_walks_the_same_games():
    first, second = tiny_context(), tiny_context()
    for context in (first, second):
        OnPolicySampling(walkers=8).traverse(context, 20)
    n = len(first.advantage_buffer)
    assert len(second.advantage_buffer) == n
    torch.testing.assert_close(
        first.advantage_buffer.targets[:n], second.advantage_buffer.targets[:n]
    )


def test_its_arguments_are_checked_by_the_base_class():
    with pytest.raises(ConfigError, match="OnPolicySampling walkers=0; expected an int > 0"):
        OnPolicySampling(walkers=0)


def test_deep_cfr_trains_with_it_from_python():
    model = tiny_model(network=TwoLayerNet, sampler=OnPolicySampling(walkers=16))
    fit(model, max_epochs=2)
    rows = model.iteration_metrics["traversal/advantage_rows"]
    assert rows > 0 and len(model.advantage_buffers[0]) > 0
    assert torch.isfinite(torch.tensor(model.iteration_metrics["loss/advantage_p0"]))
