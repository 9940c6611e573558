import pytest
import torch
from sampler_runs import (
    BRANCHING_ROOT,
    MIXED_HEADS,
    SEAT,
    assert_the_context_generator_alone_decides,
    assert_unbiased_where_sampled,
    run_from,
    second_decisions,
)
from traversal_reference import TINY, buffers, context, held, make_queue, rows_at

from lostcities_cfr.cfr import uniform_strategy
from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules


def node_bound(sampler: BudgetedSampling, rules: Rules) -> int:
    """The most decision nodes one traversal can visit (``docs/algorithms.md``, "Cost"):
    ``L (1 + max_branches * b)``, with rounds of at most ``L = max_turns`` decisions and at
    most ``b = max(2 * hand_size, 1 + n_colors)`` legal actions at a node."""
    b = max(2 * rules.hand_size, 1 + rules.n_colors)
    return rules.max_turns * (1 + sampler.max_branches * b)


def traverse(sampler, n=300, heads=MIXED_HEADS, rules=TINY, seed=0):
    queue = make_queue(heads, rules=rules)
    advantage, strategy = buffers(rules=rules)
    stats = sampler.traverse(context(queue, advantage, strategy, seed=seed, rules=rules), n)
    return stats, advantage, strategy, queue


def test_playout_regrets_are_unbiased_for_the_node_regrets():
    # Every traverser node of the trajectory branches, so the root and each second
    # decision the exploring trajectory reaches carry rows whose mean is v(h, a) - v(h).
    n = 4000
    sampler = BudgetedSampling(exploration=0.5, branch_prob=1.0, max_branches=8)
    _, advantage, _, _ = run_from(sampler, BRANCHING_ROOT, n)
    _, _, samples = rows_at(advantage, BRANCHING_ROOT)
    assert len(samples) == n
    assert_unbiased_where_sampled(advantage, [BRANCHING_ROOT, *second_decisions(BRANCHING_ROOT)])


@pytest.mark.parametrize("branch_prob", [0.3, 1.0])
def test_cost_per_traversal_stays_within_the_bound(branch_prob):
    sampler = BudgetedSampling(branch_prob=branch_prob, max_branches=1)
    stats, _, _, queue = traverse(sampler)
    assert stats.nodes == queue.stats().rows
    assert stats.nodes <= stats.traversals * node_bound(sampler, TINY)
    assert stats.advantage_rows <= stats.traversals * sampler.max_branches
    if branch_prob == 1.0:  # the traverser's first node always branches
        assert stats.advantage_rows == stats.traversals


def test_rows_are_well_formed_and_each_step_submits_once_per_network():
    # Uniform strategies: every regret row sums to 0 over its legal actions.
    stats, advantage, strategy, queue = traverse(
        BudgetedSampling(branch_prob=0.5), heads=(uniform_strategy, uniform_strategy)
    )
    assert stats.traversals == 300
    assert (stats.advantage_rows, stats.strategy_rows) == (len(advantage), len(strategy))
    assert stats.advantage_rows > 0 and stats.strategy_rows > 0
    _, legal, regrets = held(advantage)
    assert legal.any(1).all() and not regrets[~legal].any()
    torch.testing.assert_close(regrets.sum(1), torch.zeros(len(regrets)), atol=1e-4, rtol=0)
    _, legal, sigma = held(strategy)
    torch.testing.assert_close(sigma.sum(1), torch.ones(len(sigma)))
    assert not sigma[~legal].any()
    assert all(len(names) == len(set(names)) for names in queue.flushes)
    assert queue.stats().calls == sum(len(names) for names in queue.flushes)


def test_full_size_rounds_finish_within_the_bound():
    classic = Rules.classic()
    sampler = BudgetedSampling(walkers=2, branch_prob=0.1, max_branches=1)
    stats, advantage, _, _ = traverse(
        sampler, n=2, heads=(uniform_strategy, uniform_strategy), rules=classic
    )
    assert 0 < stats.nodes <= 2 * node_bound(sampler, classic)
    _, legal, regrets = held(advantage)
    assert not regrets[~legal].any()


@pytest.mark.parametrize(
    "kwargs",
    [{"exploration": 1.5}, {"branch_prob": 0.0}, {"branch_prob": 1.1}, {"max_branches": 0}],
)
def test_invalid_arguments_are_refused(kwargs):
    with pytest.raises(ConfigError):
        BudgetedSampling(**kwargs)


@pytest.mark.parametrize("traverser", [0, 1])
def test_only_the_trajectorys_nodes_write_rows_each_to_its_players_buffer(traverser):
    # Advantage rows at the traverser's branch nodes, strategy rows at the opponent's nodes
    # of the trajectory: none from the playouts, which visit many more of them.
    queue = make_queue(MIXED_HEADS)
    advantage, strategy = buffers()
    # One walker per batch: its first branch node is record 0, whose playouts are playouts too.
    sampler = BudgetedSampling(walkers=1, branch_prob=1.0, max_branches=4)
    stats = sampler.traverse(context(queue, advantage, strategy, traverser=traverser), 64)
    assert bool((held(advantage)[0][:, SEAT] == 1 - traverser).all())
    assert bool((held(strategy)[0][:, SEAT] == traverser).all())
    assert 0 < stats.strategy_rows <= stats.traversals * TINY.max_turns // 2


def test_every_branch_node_of_a_trajectory_writes_its_own_row():
    # One walker that branches at each of its traverser nodes, up to max_branches: one row
    # per node, each at a different state. The traverser's first turn alone holds two
    # decisions (a card, then a draw).
    for seed in range(5):
        stats, advantage, _, _ = traverse(
            BudgetedSampling(walkers=1, branch_prob=1.0, max_branches=2), n=1, seed=seed
        )
        features, _, _ = held(advantage)
        assert len(features) == stats.advantage_rows == 2
        assert len(features.unique(dim=0)) == 2


def test_the_context_generator_alone_decides_the_trajectories():
    assert_the_context_generator_alone_decides(BudgetedSampling(walkers=64, branch_prob=0.5), 100)
