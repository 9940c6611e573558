"""ESCHERSampling: regret rows from the value of every child, value rows from on-policy play."""

from pathlib import Path

import pytest
import torch
import yaml
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
from lostcities_cfr.cfr.baseline_outcome_sampling import BaselineOutcomeSampling
from lostcities_cfr.cfr.escher import VALUE_NETWORK, ESCHERSampling
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.encoding import encode_history, history_feature_size

ROOT_DIR = Path(__file__).resolve().parents[2]

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
    # The switch decision itself explores (the sampling policy picks the root's action):
    # under sigma alone all 64 trajectories would be one.
    assert len({abs(float(t)) for t in targets}) > 1


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
    # One on-policy state per trajectory (after the switch at the root), whose target is the
    # value of the state where its trajectory was cut, for the player who moved there.
    assert ctx.stats.value_rows == 16
    held = ctx.value_buffer.features[:16].float()
    with torch.no_grad():
        before_cut = linear_value()(held)[:, 0]
    targets = ctx.value_buffer.targets[:16, 0]
    assert bool((targets != 0).all())
    assert not torch.allclose(targets, before_cut, atol=1e-3)


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


def test_the_sampling_policy_mixes_uniform_sigma_and_the_guide_by_their_weights():
    sampler = ESCHERSampling(exploration=0.2, guide="discard-only", guide_weight=0.5)
    games = GameBatch.from_states([ROOT])
    legal = games.legal_mask()  # [1, A]
    sigma = torch.rand(legal.shape, generator=torch.Generator().manual_seed(0)) * legal
    sigma /= sigma.sum(1, keepdim=True)
    mu = sampler.sampling_policy(games, torch.arange(1), sigma, legal)
    expected = 0.2 * legal / legal.sum() + 0.3 * sigma
    expected[0, sampler._guide.act(games)[0]] += 0.5
    torch.testing.assert_close(mu, expected)
    unguided = ESCHERSampling(exploration=0.2, guide=None, guide_weight=0.0)
    mu = unguided.sampling_policy(games, torch.arange(1), sigma, legal)
    torch.testing.assert_close(mu, 0.2 * legal / legal.sum() + 0.8 * sigma)


@pytest.mark.parametrize("sampler", [ESCHERSampling, BaselineOutcomeSampling])
@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"exploration": 0.0}, "exploration=0"),
        ({"exploration": 1.5}, "exploration=1.5"),
        ({"guide": "heuristic:balanced", "guide_weight": 0.9}, "guide_weight=0.9"),
        ({"guide": None, "guide_weight": 0.3}, "needs a guide"),
        ({"guide": "nonsense"}, "guide: "),
        ({"max_decisions": 0}, "max_decisions=0"),
        ({"walkers": 0}, "walkers=0"),
    ],
)
def test_unworkable_settings_are_refused_naming_the_field(sampler, kwargs, named):
    with pytest.raises(ConfigError, match=f"{sampler.__name__}.*{named}"):
        sampler(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"switch_range": 0}, "switch_range=0"), ({"td_lambda": 1.5}, "td_lambda=1.5")],
)
def test_unworkable_escher_settings_are_refused_naming_the_field(kwargs, named):
    with pytest.raises(ConfigError, match=named):
        ESCHERSampling(**kwargs)


def test_the_defaults_are_the_shipped_recipe():
    # A notebook's ESCHERSampling() is classic_strong's sampler.
    config = yaml.safe_load((ROOT_DIR / "configs" / "classic_strong.yaml").read_text())
    recipe = config["model"]["sampler"]["init_args"]
    sampler = ESCHERSampling()
    assert {field: getattr(sampler, field) for field in recipe} == recipe


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


class _CountingValue(torch.nn.Module):
    """``linear_value()``, counting the rows it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.net, self.rows = linear_value(), 0

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        self.rows += len(history)
        return self.net(history)


@pytest.mark.parametrize(
    ("td_lambda", "max_decisions"), [(1.0, None), (1.0, ROOT.turn + 2), (0.5, None)]
)
def test_the_value_network_is_asked_only_where_a_target_reads_it(td_lambda, max_decisions):
    # Switching at the root writes no advantage rows, so no children are valued: V is read
    # at cut states, and with td_lambda < 1 at every on-policy state (the bootstrap).
    sampler = ESCHERSampling(
        walkers=8, switch_range=1, td_lambda=td_lambda, max_decisions=max_decisions
    )
    ctx = escher_context()
    counting = _CountingValue()
    ctx.queue.register(VALUE_NETWORK, counting)
    sampler.traverse_games(repeated(ROOT, 8), ctx)
    assert ctx.stats.advantage_rows == 0
    assert (ctx.stats.truncated > 0) == (max_decisions is not None)
    if td_lambda < 1:
        assert counting.rows == ctx.stats.value_rows + ctx.stats.truncated
    else:
        assert counting.rows == ctx.stats.truncated
