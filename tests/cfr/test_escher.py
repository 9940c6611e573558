"""ESCHERSampling: regret rows from the value of every child, value rows from on-policy play."""

import pytest
import torch
from sampler_runs import MIXED_HEADS
from traversal_reference import (
    TINY,
    advance,
    argmax_head,
    buffers,
    context,
    make_queue,
    repeated,
    rows_at,
    strategy,
)

from lostcities_cfr.cfr import ReservoirBuffer
from lostcities_cfr.cfr.escher import VALUE_NETWORK, ESCHERSampling
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.encoding import encode_history, history_feature_size

# Player 0 at a card decision, early in a tiny deal: its children are fixed (no deck draw).
ROOT = advance(TINY, seed=5, decisions=0)


def linear_value(seed: int = 3) -> torch.nn.Module:
    """A fixed value network: a random linear map of the history features to one value."""
    torch.manual_seed(seed)
    return torch.nn.Linear(history_feature_size(TINY), 1)


def escher_context(sampler_seed=0, traverser=0, heads=MIXED_HEADS):
    queue = make_queue(heads)
    queue.register(VALUE_NETWORK, linear_value())
    advantage, strategy_buffer = buffers()
    value = ReservoirBuffer(200_000, history_feature_size(TINY), 1, target_dtype=torch.float32)
    ctx = context(queue, advantage, strategy_buffer, traverser=traverser, seed=sampler_seed)
    ctx.value_buffer = value
    return ctx


def child_values(state, traverser, net, scale):
    """q(a) for the traverser: the value network's value of each child, from the traverser's
    side, or the child's score where the round ends."""
    q = torch.zeros(TINY.n_actions, dtype=torch.float64)
    for a in state.legal_actions():
        child = state.clone()
        child.apply(a)
        if child.is_terminal:
            q[a] = child.returns()[traverser] / scale
            continue
        with torch.no_grad():
            v = float(net(encode_history(GameBatch.from_states([child])))[0, 0])
        q[a] = v if child.current_player == traverser else -v
    return q


def test_regret_rows_are_the_children_values_minus_their_sigma_mean():
    sampler = ESCHERSampling(
        walkers=64,
        utility_scale=10.0,
        switch_range=1000,
        guide=None,
        guide_weight=0.0,
        exploration=0.5,
    )
    ctx = escher_context()
    sampler.traverse_games(repeated(ROOT, 64), ctx)
    _, legal, rows = rows_at(ctx.advantage_buffer, ROOT)
    assert len(rows) == 64  # every trajectory starts at the root, before its switch
    q = child_values(ROOT, 0, linear_value(), 10.0)
    sigma = strategy(ctx.queue, ROOT)
    expected = (q - (sigma * q).sum()) * legal[0]
    torch.testing.assert_close(rows, expected.float().expand_as(rows), atol=2e-3, rtol=0)


def test_a_trajectory_that_switches_at_once_values_its_states_by_its_outcome():
    # Deterministic strategies and one deal: after the root's exploring action the round is
    # fixed, so every value target is the outcome of one of the root's actions, for the mover.
    sampler = ESCHERSampling(walkers=64, switch_range=1, utility_scale=1.0)
    ctx = escher_context(heads=(argmax_head, argmax_head))
    sampler.traverse_games(repeated(ROOT, 64), ctx)
    assert ctx.stats.advantage_rows == 0
    assert ctx.stats.value_rows > 64
    outcomes = set()
    for a in ROOT.legal_actions():
        state = ROOT.clone()
        state.apply(a)
        while not state.is_terminal:
            state.apply(int(strategy(ctx.queue, state).argmax()))
        outcomes.add(abs(float(state.returns()[0])))
    targets = ctx.value_buffer.targets[: len(ctx.value_buffer), 0]
    assert {abs(float(t)) for t in targets} <= outcomes


def test_td_lambda_targets_blend_the_next_value_and_the_next_target():
    sampler = ESCHERSampling(td_lambda=0.5)
    ctx = escher_context()
    walker = torch.tensor([0, 1])
    history = torch.zeros(2, history_feature_size(TINY)).half()
    # Two steps of two trajectories; walker 1 moves as player 1 at its second step.
    steps = [
        (walker, history, torch.tensor([1.0, 1.0]), torch.tensor([0.2, 0.4])),
        (walker, history, torch.tensor([-1.0, -1.0]), torch.tensor([0.6, -0.2])),
    ]
    outcome = torch.tensor([1.0, -1.0])
    sampler._write_value_rows(steps, outcome, ctx)
    targets = ctx.value_buffer.targets[: len(ctx.value_buffer), 0]
    # Last steps: the outcome, for the mover (player 1: negated). First steps:
    # 0.5 * V(next) + 0.5 * G(next), for player 0.
    expected = torch.tensor([-1.0, 1.0, 0.5 * 0.6 + 0.5 * 1.0, 0.5 * -0.2 + 0.5 * -1.0])
    torch.testing.assert_close(targets, expected)


def test_rounds_past_max_decisions_are_cut_and_counted():
    sampler = ESCHERSampling(walkers=16, max_decisions=ROOT.turn + 2, switch_range=1)
    ctx = escher_context()
    sampler.traverse_games(repeated(ROOT, 16), ctx)
    assert ctx.stats.truncated == 16
    assert ctx.stats.nodes == 16 * 3  # two decisions, then the cut state's value


def test_the_sampling_policy_has_full_support_and_gives_the_guide_its_weight():
    sampler = ESCHERSampling(exploration=0.2, guide="discard-only", guide_weight=0.5)
    games = GameBatch.from_states([ROOT, ROOT])
    legal = games.legal_mask()
    sigma = torch.zeros(legal.shape)
    sigma[:, legal[0].nonzero()[0]] = 1.0
    mu = sampler.sampling_policy(games, torch.arange(2), sigma, legal)
    torch.testing.assert_close(mu.sum(1), torch.ones(2))
    assert bool((mu[legal] > 0).all()) and not mu[~legal].any()
    guided = sampler._guide.act(games)
    assert bool((mu[torch.arange(2), guided] >= 0.5).all())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"exploration": 0.0},
        {"guide_weight": 0.9},
        {"guide": None, "guide_weight": 0.3},
        {"guide": "nonsense"},
        {"switch_range": 0},
        {"td_lambda": 1.5},
        {"max_decisions": 0},
    ],
)
def test_unworkable_settings_are_refused(kwargs):
    with pytest.raises(ConfigError):
        ESCHERSampling(**kwargs)


def test_without_a_value_buffer_the_sampler_says_what_it_needs():
    ctx = escher_context()
    ctx.value_buffer = None
    with pytest.raises(ConfigError, match="value network"):
        ESCHERSampling().traverse_games(repeated(ROOT, 2), ctx)


def test_the_same_seed_walks_the_same_trajectories_and_writes_the_same_rows():
    # Every draw (the on-policy switch, the sampling policy, the opponent's moves) comes from
    # the context's generator, not torch's global one: a seeded traversal replays exactly.
    def rows_written(seed: int, global_seed: int) -> list[torch.Tensor]:
        ctx = escher_context(sampler_seed=seed)
        torch.manual_seed(global_seed)
        ESCHERSampling(walkers=16, switch_range=4).traverse_games(repeated(ROOT, 16), ctx)
        buffers = [ctx.advantage_buffer, ctx.strategy_buffer, ctx.value_buffer]
        return [b.targets[: len(b)].clone() for b in buffers] + [
            b.features[: len(b)].clone() for b in buffers
        ]

    first, again, other = rows_written(1, 10), rows_written(1, 11), rows_written(2, 10)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(
        a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, other, strict=True)
    )
