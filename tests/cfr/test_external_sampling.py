import pytest
import torch
from sampler_runs import (
    MIXED_HEADS,
    assert_the_context_generator_alone_decides,
    assert_unbiased_where_sampled,
    run_from,
)
from traversal_reference import (
    TINY,
    ExactTree,
    advance,
    argmax_head,
    assert_same_rows,
    buffers,
    context,
    held,
    make_queue,
    rows_at,
)
from traversal_reference import strategy as strategy_of

from lostcities_cfr.cfr import external_sampling, regret_matching
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.traversal import current_strategies
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch, Rules


def mixed_states() -> list:
    """Tiny states at different points of the round (both players to move)."""
    states = [advance(TINY, seed, seed % 4) for seed in range(12)]
    return [s for s in states if not s.is_terminal]


@pytest.mark.parametrize("traverser", [0, 1])
def test_rows_equal_the_exact_regrets_and_strategies_of_a_recursive_reference(traverser):
    # A deterministic opponent makes external sampling exact: its rows must be the
    # reference's, node for node.
    heads = [None, None]
    heads[traverser], heads[1 - traverser] = regret_matching, argmax_head
    states = mixed_states()
    queue = make_queue(tuple(heads))
    advantage, strategy = buffers()
    ctx = context(queue, advantage, strategy, traverser=traverser, iteration=3)
    ExternalSampling().traverse_games(GameBatch.from_states(states), ctx)
    stats = ctx.stats

    reference = ExactTree(make_queue(tuple(heads)), traverser)
    for state in states:
        reference.value(state)
    assert_same_rows(held(advantage), reference.traverser_rows)
    assert_same_rows(held(strategy), reference.opponent_rows)
    n_nodes = len(reference.traverser_rows) + len(reference.opponent_rows)
    assert stats.nodes == n_nodes == queue.stats().rows
    assert stats.advantage_rows == len(reference.traverser_rows) == len(advantage)
    assert stats.strategy_rows == len(reference.opponent_rows) == len(strategy)
    assert stats.traversals == len(states)
    assert set(advantage.iteration[: len(advantage)].tolist()) == {3}


def test_each_step_submits_once_per_network_and_flushes_once():
    queue = make_queue(MIXED_HEADS)
    ExternalSampling().traverse_games(
        GameBatch.from_states(mixed_states()), context(queue, *buffers())
    )
    assert all(len(names) == len(set(names)) for names in queue.flushes)
    assert any(len(names) == 2 for names in queue.flushes)  # the mixed batch needs both nets
    assert queue.stats().calls == sum(len(names) for names in queue.flushes)


def test_expected_root_regrets_over_opponent_samples_equal_the_exact_ones():
    root = advance(TINY, seed=5, decisions=0)
    _, advantage, _, _ = run_from(ExternalSampling(), root, 3000)
    _, _, samples = rows_at(advantage, root)
    assert len(samples) == 3000
    assert_unbiased_where_sampled(advantage, [root])


def test_expanding_the_opponent_gives_its_reach_times_the_exact_regrets_in_one_walk():
    # Chance-sampled CFR: the traverser's (player 1's) first rows below the opponent's turn
    # are the opponent's probability of reaching them times their exact regrets, from a
    # single traversal (nothing but the deal is sampled, and the deal is fixed here).
    root = advance(TINY, seed=0, decisions=0)  # player 0, the opponent, opens
    queue = make_queue(MIXED_HEADS)
    advantage, strategy = buffers()
    ctx = context(queue, advantage, strategy, traverser=1)
    ExternalSampling(expand_opponent=True).traverse_games(GameBatch.from_states([root]), ctx)
    reached = []  # (the traverser's first nodes, the opponent's probability of each)

    def descend(state, reach: float) -> None:
        if state.current_player == 1:
            reached.append((state, reach))
            return
        sigma = strategy_of(queue, state)
        for action in state.legal_actions():
            child = state.clone()
            child.apply(action)
            descend(child, reach * float(sigma[action]))

    descend(root, 1.0)
    assert len(reached) >= 4
    for state, reach in reached:
        _, _, rows = rows_at(advantage, state)
        exact = ExactTree(make_queue(MIXED_HEADS), traverser=1).regrets(state)
        assert len(rows) == 1
        torch.testing.assert_close(rows[0].double(), reach * exact, atol=2e-3, rtol=0)
    # The strategy rows are those of one sampled opponent path: the root's is written once.
    _, _, root_rows = rows_at(strategy, root)
    assert len(root_rows) == 1
    torch.testing.assert_close(root_rows[0].double(), strategy_of(queue, root), atol=2e-3, rtol=0)


@pytest.mark.parametrize("expand_opponent", [False, True])
def test_aggregated_rows_are_the_per_information_set_sums_of_the_plain_rows(expand_opponent):
    # Aggregation happens after the walk: with the same generator the walks are the same,
    # and each aggregated row is the sum of the plain rows sharing its features, over the
    # batch's traversals.
    rows = {}
    for aggregate in (False, True):
        queue = make_queue(MIXED_HEADS)
        advantage, strategy = buffers()
        sampler = ExternalSampling(walkers=16, aggregate=aggregate, expand_opponent=expand_opponent)
        sampler.traverse(context(queue, advantage, strategy, seed=3), 16)
        rows[aggregate] = held(advantage), held(strategy)
    (features, legal, regrets), plain_strategy = rows[False]
    (agg_features, agg_legal, agg_regrets), agg_strategy = rows[True]
    assert len(agg_features) == len(torch.unique(features, dim=0)) < len(features)
    for key, mask, sums in zip(agg_features, agg_legal, agg_regrets, strict=True):
        match = (features == key).all(1)
        assert (legal[match] == mask).all()
        torch.testing.assert_close(sums, regrets[match].sum(0) / 16, atol=2e-3, rtol=2e-3)
    for a, b in zip(plain_strategy, agg_strategy, strict=True):  # strategy rows untouched
        assert torch.equal(a, b)


def test_information_set_sums_adds_the_rows_of_equal_features_and_legal_actions():
    features = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    legal = torch.tensor([[True, True], [True, False], [True, True], [True, False]])
    regrets = torch.tensor([[1.0, -1.0], [2.0, 0.0], [3.0, 1.0], [4.0, 0.0]])
    sums = external_sampling.information_set_sums(features, legal, regrets, traversals=2)
    got = {
        (tuple(f.tolist()), tuple(m.tolist())): r.tolist() for f, m, r in zip(*sums, strict=True)
    }
    assert got == {
        ((1.0, 0.0), (True, True)): [2.0, 0.0],
        ((0.0, 1.0), (True, False)): [1.0, 0.0],
        ((1.0, 0.0), (True, False)): [2.0, 0.0],
    }


def test_traverse_deals_games_and_its_rows_are_well_formed():
    queue = make_queue(MIXED_HEADS)
    advantage, strategy = buffers()
    sampler = ExternalSampling(walkers=40)
    stats = sampler.traverse(context(queue, advantage, strategy, traverser=1, iteration=2), 100)
    assert stats.traversals == 100
    assert stats.nodes == queue.stats().rows
    assert (stats.advantage_rows, stats.strategy_rows) == (len(advantage), len(strategy))
    assert stats.advantage_rows > 100 and stats.strategy_rows > 100
    _, legal, sigma = held(strategy)
    torch.testing.assert_close(sigma.sum(1), torch.ones(len(sigma)))
    assert not sigma[~legal].any()
    _, legal, regrets = held(advantage)
    assert legal.any(1).all() and not regrets[~legal].any()


def test_the_same_generator_seed_gives_the_same_rows():
    assert_the_context_generator_alone_decides(ExternalSampling(walkers=16), 32, seed=7)


def test_traversal_leaves_the_given_games_unchanged():
    games = GameBatch.from_states(mixed_states())
    before = games.clone()
    ExternalSampling().traverse_games(games, context(make_queue(MIXED_HEADS), *buffers()))
    assert torch.equal(games.turn, before.turn) and torch.equal(games.hands, before.hands)


def test_a_frontier_beyond_max_frontier_is_refused():
    classic = Rules.classic()
    with pytest.raises(ConfigError, match=r"max_frontier=2000.*tiny rules.*BudgetedSampling"):
        queue = make_queue(MIXED_HEADS, rules=classic)
        ctx = context(queue, *buffers(1000, rules=classic), rules=classic)
        ExternalSampling(walkers=2, max_frontier=2000).traverse(ctx, 2)


def test_a_level_of_exactly_max_frontier_nodes_is_walked(monkeypatch):
    levels = []

    def recording(queue, games, features, legal, live):
        levels.append(len(live))
        return current_strategies(queue, games, features, legal, live)

    monkeypatch.setattr(external_sampling, "current_strategies", recording)
    games = GameBatch.from_states(mixed_states())
    ExternalSampling().traverse_games(games, context(make_queue(MIXED_HEADS), *buffers()))
    widest = max(levels)
    ExternalSampling(max_frontier=widest).traverse_games(
        games, context(make_queue(MIXED_HEADS), *buffers())
    )
    with pytest.raises(ConfigError, match=f"holds {widest} nodes"):
        ExternalSampling(max_frontier=widest - 1).traverse_games(
            games, context(make_queue(MIXED_HEADS), *buffers())
        )


@pytest.mark.parametrize(
    "kwargs", [{"walkers": 0}, {"utility_scale": 0.0}, {"utility_scale": -1.0}]
)
def test_invalid_arguments_are_refused(kwargs):
    with pytest.raises(ConfigError):
        ExternalSampling(**kwargs)
