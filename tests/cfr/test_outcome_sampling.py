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
from traversal_reference import (
    TINY,
    ExactTree,
    advance,
    assert_unbiased,
    buffers,
    context,
    held,
    make_queue,
    rows_at,
)

from lostcities_cfr.cfr.outcome_sampling import OutcomeSampling
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules

N = 20_000


def run(sampler: OutcomeSampling, root, n: int = N):
    """:func:`run_from` with room for ten rows per traversal (outcome sampling writes a
    row at every node of its one trajectory)."""
    return run_from(sampler, root, n, capacity=10 * n)


@pytest.mark.parametrize("exploration", [0.2, 0.6])
def test_sampled_regrets_are_unbiased_for_the_node_regrets(exploration):
    # E[target | node] = v(h, a) - v(h) at every node: checked at the root and at each
    # of the traverser's second decisions (each reached with probability q(a0)).
    _, advantage, _, _ = run(
        OutcomeSampling(exploration=exploration, target_clip=None), BRANCHING_ROOT
    )
    assert_unbiased_where_sampled(advantage, [BRANCHING_ROOT, *second_decisions(BRANCHING_ROOT)])


def test_reach_weighted_regrets_sum_to_the_counterfactual_regrets():
    # Lanctot et al.'s estimator: summed over all traversals and divided by their number,
    # a node's rows estimate its counterfactual regret (here the opponent has not moved
    # yet, so that is v(h, a) - v(h) itself), however rarely the node is sampled.
    sampler = OutcomeSampling(exploration=0.6, reach_weighted=True, target_clip=None)
    _, advantage, _, _ = run(sampler, BRANCHING_ROOT)
    exact = ExactTree(make_queue(MIXED_HEADS), 0)
    for state in second_decisions(BRANCHING_ROOT):
        _, _, samples = rows_at(advantage, state)
        padded = torch.cat([samples, torch.zeros(N - len(samples), TINY.n_actions)])
        assert_unbiased(padded, exact.regrets(state))


def test_every_node_gives_one_row_and_opponent_strategies_go_to_the_strategy_buffer():
    root = advance(TINY, seed=4, decisions=0)
    stats, advantage, strategy, queue = run(OutcomeSampling(), root, n=500)
    assert stats.traversals == 500
    assert stats.nodes == queue.stats().rows == stats.advantage_rows + stats.strategy_rows
    assert (stats.advantage_rows, stats.strategy_rows) == (len(advantage), len(strategy))
    assert all(len(names) == len(set(names)) == 1 for names in queue.flushes)
    _, legal, sigma = held(strategy)
    torch.testing.assert_close(sigma.sum(1), torch.ones(len(sigma)))
    assert not sigma[~legal].any()
    _, legal, regrets = held(advantage)
    assert not regrets[~legal].any()


def test_targets_are_clipped_to_target_clip():
    _, advantage, _, _ = run(OutcomeSampling(target_clip=0.5), BRANCHING_ROOT, n=500)
    _, _, regrets = held(advantage)
    assert regrets.abs().max() == 0.5


@pytest.mark.parametrize(
    "kwargs", [{"exploration": 1.1}, {"exploration": -0.1}, {"target_clip": 0.0}]
)
def test_invalid_arguments_are_refused(kwargs):
    with pytest.raises(ConfigError):
        OutcomeSampling(**kwargs)


def test_huge_weights_of_long_rounds_stay_finite_and_clipped():
    # Reach weighting over a full-size round divides by a product of ~100 sampling
    # probabilities: weights far beyond float32, which must come out clipped, not inf.
    rules = Rules(max_turns=200)
    queue = make_queue(MIXED_HEADS, rules=rules)
    advantage, strategy = buffers(rules=rules)
    sampler = OutcomeSampling(walkers=8, reach_weighted=True, target_clip=1e4)
    sampler.traverse(context(queue, advantage, strategy, rules=rules), 8)
    _, _, regrets = held(advantage)
    assert torch.isfinite(regrets).all() and regrets.abs().max() == 1e4


@pytest.mark.parametrize("traverser", [0, 1])
def test_the_traversers_nodes_give_advantage_rows_and_the_opponents_strategy_rows(traverser):
    queue = make_queue(MIXED_HEADS)
    advantage, strategy = buffers()
    ctx = context(queue, advantage, strategy, traverser=traverser)
    OutcomeSampling(walkers=64).traverse(ctx, 64)
    assert len(advantage) and len(strategy)
    assert bool((held(advantage)[0][:, SEAT] == 1 - traverser).all())
    assert bool((held(strategy)[0][:, SEAT] == traverser).all())


def test_a_lone_trajectory_writes_a_row_at_each_of_its_traverser_nodes():
    root = advance(TINY, seed=4, decisions=0)
    stats, advantage, _, _ = run(OutcomeSampling(walkers=1), root, n=1)
    assert stats.advantage_rows == len(advantage) >= 2  # the tiny round's decisions of player 0


def test_the_context_generator_alone_decides_the_trajectories():
    assert_the_context_generator_alone_decides(OutcomeSampling(walkers=64), 64)
