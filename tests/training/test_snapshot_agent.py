"""SD-CFR's agent: one stored iteration per deal, drawn by its weight from a number that
is a hash of the deal, so that a round is played by one iteration from start to end and a
duplicate pair's two seatings draw the same one."""

from __future__ import annotations

import pytest
import torch
from tiny_training import seeded_play_under_two_global_seeds

from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.training.agents import SnapshotAgent, deal_uniforms

CLASSIC = Rules.classic()


class Constant:
    """An agent that always answers ``k``: tells which iteration played a state."""

    def __init__(self, k: int) -> None:
        self.k = k

    def act(self, batch: GameBatch) -> torch.Tensor:
        return torch.full((batch.batch_size,), self.k, dtype=torch.int64)


def snapshot_agent(weights: list[float]) -> SnapshotAgent:
    """SD-CFR over ``len(weights)`` iterations whose iteration k always plays action k."""
    tiny = Rules.tiny()
    net = NetworkConfig(width=4, depth=1).build(feature_size(tiny), tiny.n_actions)
    agent = SnapshotAgent([[net, net] for _ in weights], weights)
    agent.agents = [Constant(k) for k in range(len(weights))]
    return agent


def play_a_few_moves(batch: GameBatch, moves: int, seed: int = 0) -> GameBatch:
    batch = batch.clone()
    g = torch.Generator().manual_seed(seed)
    for _ in range(moves):
        legal = batch.legal_mask().float()  # [B, A]
        batch.step(torch.multinomial(legal, 1, generator=g).squeeze(1))
    return batch


def test_deal_uniforms_give_every_deal_its_own_number_spread_over_the_unit_interval():
    u = deal_uniforms(GameBatch.new(CLASSIC, 4000, seed=2026))  # [B]
    assert u.dtype == torch.float64
    assert u.unique().numel() == 4000  # a weighted sum of card ids gave ~14% repeats
    assert u.min() >= 0.0 and u.max() < 1.0
    deciles = torch.histc(u.float(), bins=10, min=0.0, max=1.0)
    assert deciles.min() > 320 and deciles.max() < 480  # 400 each, +-4 standard deviations


def test_a_deals_number_is_the_same_in_every_state_of_its_round_and_differs_across_deals():
    batch = GameBatch.new(CLASSIC, 64, seed=3)
    later = play_a_few_moves(batch, 30)
    assert not torch.equal(later.hands, batch.hands)
    assert torch.equal(deal_uniforms(later), deal_uniforms(batch))
    other = GameBatch.new(CLASSIC, 64, seed=4)
    assert not torch.isin(deal_uniforms(other), deal_uniforms(batch)).any()


def test_a_deal_with_two_cards_swapped_gets_another_number():
    batch = GameBatch.new(CLASSIC, 8, seed=5)
    swapped = batch.clone()
    swapped.deck[:, [10, 11]] = swapped.deck[:, [11, 10]]
    differs = swapped.deck[:, 10] != batch.deck[:, 10]
    assert differs.any()
    assert (deal_uniforms(swapped) != deal_uniforms(batch))[differs].all()


def test_iterations_are_drawn_in_proportion_to_their_weights():
    agent = snapshot_agent([1.0, 0.0, 3.0])
    drawn = agent.act(GameBatch.new(CLASSIC, 4000, seed=7))  # [B]: the iteration that played
    counts = torch.bincount(drawn, minlength=3)
    assert counts[1] == 0  # weight 0: never drawn
    assert abs(counts[2] / 4000 - 0.75) < 0.03  # 3 / 4, +-4 standard deviations
    assert counts.sum() == 4000


def test_every_state_of_a_deal_is_played_by_the_iteration_its_first_state_drew():
    agent = snapshot_agent([1.0, 2.0, 3.0, 4.0])
    batch = GameBatch.new(CLASSIC, 200, seed=8)
    first = agent.act(batch)
    assert len(first.unique()) == 4
    assert torch.equal(agent.act(play_a_few_moves(batch, 25)), first)
    # a subset of the games (the arena drops finished ones) keeps each deal's iteration
    rows = torch.arange(0, 200, 3)
    assert torch.equal(agent.act(batch.select(rows)), first[rows])


def test_the_drawn_iterations_actions_reach_their_own_games():
    agent = snapshot_agent([1.0, 1.0])
    batch = GameBatch.new(CLASSIC, 300, seed=9)
    expected = (deal_uniforms(batch) >= 0.5).long()  # iteration 1 owns the upper half
    assert torch.equal(agent.act(batch), expected)


def test_without_stored_iterations_sdcfr_is_refused_with_the_setting_that_stores_them():
    with pytest.raises(ConfigError, match=r"DeepCFR\(snapshots=True\)"):
        SnapshotAgent([], [])


def trained_like_snapshots(k: int) -> list[list[torch.nn.Module]]:
    """``k`` stored iterations of classic-rules advantage networks with random weights:
    regret matching on them spreads probability over several legal actions."""
    torch.manual_seed(11)
    config = NetworkConfig(width=16, depth=1)
    return [
        [config.build(feature_size(CLASSIC), CLASSIC.n_actions) for _ in range(2)] for _ in range(k)
    ]


def test_the_agent_is_named_sdcfr_unless_named_and_samples_unless_greedy():
    snapshots = trained_like_snapshots(2)
    batch = GameBatch.new(CLASSIC, 256, seed=12)
    sampled = SnapshotAgent(snapshots, [1.0, 2.0], seed=0)
    assert sampled.name == "sdcfr"
    assert SnapshotAgent(snapshots, [1.0, 2.0], name="mine").name == "mine"
    # a seeded agent draws fresh numbers at every call: sampling differs, arg-max does not
    assert not torch.equal(sampled.act(batch), sampled.act(batch))
    greedy = SnapshotAgent(snapshots, [1.0, 2.0], greedy=True)
    assert torch.equal(greedy.act(batch), greedy.act(batch))


def test_a_seeded_agent_replays_its_sampling_whatever_the_global_generator_holds():
    snapshots = trained_like_snapshots(3)
    batch = GameBatch.new(CLASSIC, 256, seed=13)
    first = seeded_play_under_two_global_seeds(
        lambda: SnapshotAgent(snapshots, [1.0, 1.0, 1.0], seed=7), batch
    )
    other = SnapshotAgent(snapshots, [1.0, 1.0, 1.0], seed=8).act(batch)
    assert not torch.equal(first, other)
