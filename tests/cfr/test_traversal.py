import time

import pytest
import torch
from traversal_reference import TINY, advance, argmax_head, buffers, context, linear_net, make_queue

from lostcities_cfr.cfr.outcome_sampling import OutcomeSampling
from lostcities_cfr.cfr.traversal import (
    TraversalStats,
    current_strategies,
    explore,
    sample_actions,
)
from lostcities_cfr.game import GameBatch


def test_sampled_actions_follow_the_probabilities_and_never_take_a_zero():
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75], [1e-8, 0.0, 1.0, 0.0]]).repeat(20_000, 1)
    actions = sample_actions(probs, torch.Generator().manual_seed(0))
    assert bool((probs.gather(1, actions[:, None]) > 0).all())
    first = actions[0::2]
    assert abs(float((first == 3).float().mean()) - 0.75) < 0.01


def test_unnormalised_rows_are_sampled_in_proportion():
    probs = torch.tensor([[2.0, 6.0]]).repeat(20_000, 1)
    actions = sample_actions(probs, torch.Generator().manual_seed(1))
    assert abs(float(actions.float().mean()) - 0.75) < 0.01


def test_exploration_mixes_in_the_uniform_strategy_over_legal_actions():
    sigma = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    legal = torch.tensor([[True, True, False, True]])
    mixed = explore(sigma, legal, 0.6)
    torch.testing.assert_close(mixed, torch.tensor([[0.6, 0.2, 0.0, 0.2]]))


def test_current_strategies_send_each_players_rows_to_its_own_network():
    states = [advance(TINY, seed, seed % 4) for seed in range(16)]
    games = GameBatch.from_states([s for s in states if not s.is_terminal])
    queue = make_queue((argmax_head, argmax_head), seeds=(1, 2))
    legal, features = games.legal_mask(), games.encode()
    sigma = current_strategies(queue, games, features, legal)
    assert queue.flushes == [["advantage_p0", "advantage_p1"]]
    for p, seed in enumerate((1, 2)):
        rows = games.current_player == p
        assert rows.any()
        expected = argmax_head(linear_net(seed)(features[rows]), legal[rows])
        torch.testing.assert_close(sigma[rows], expected)


def test_stats_add_up():
    a = TraversalStats(1, 10, 3, 4, 1.0, 0.5)
    b = TraversalStats(2, 20, 6, 8, 2.0, 0.25)
    assert a + b == TraversalStats(3, 30, 9, 12, 3.0, 0.75)
    assert (a + b).nodes_per_s == 10.0


def test_traverser_must_be_0_or_1():
    with pytest.raises(ValueError, match="traverser"):
        context(make_queue((argmax_head, argmax_head)), *buffers(), traverser=2)


def test_traverse_deals_from_the_context_generator_and_accumulates_its_seconds():
    def run(seed: int, global_seed: int, n: int = 24):
        advantage, strategy = buffers()
        ctx = context(make_queue((argmax_head, argmax_head)), advantage, strategy, seed=seed)
        torch.manual_seed(global_seed)  # the deals must not come from torch's global generator
        started = time.perf_counter()
        stats = OutcomeSampling(walkers=8).traverse(ctx, n)
        return ctx, stats, time.perf_counter() - started, advantage

    ctx, stats, wall, advantage = run(seed=1, global_seed=0)
    _, _, _, again = run(seed=1, global_seed=1)
    assert torch.equal(advantage.features[: len(advantage)], again.features[: len(again)])
    assert stats.traversals == 24 and 0 < stats.seconds <= wall
    first = stats.seconds
    OutcomeSampling(walkers=8).traverse(ctx, 1)
    assert ctx.stats.seconds > first and ctx.stats.traversals == 25
