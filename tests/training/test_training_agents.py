"""Agents over a Deep CFR model's networks: each seat of the current strategy plays its own
advantage network by regret matching, the average strategy plays the strategy network's
masked softmax, and greedy agents play the arg-max."""

from __future__ import annotations

import functools

import pytest
import torch
from tiny_training import (
    answer_always,
    lowest_and_highest_legal,
    positions,
    preference,
    seeded_play_under_two_global_seeds,
    tiny_model,
)

from lostcities_cfr.cfr import masked_softmax, regret_matching
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.training.agents import SeatAgent, current_agent, policy_agent

TINY = Rules.tiny()
A = TINY.n_actions


@pytest.fixture
def batch() -> GameBatch:
    batch = positions(TINY)
    assert set(batch.current_player.tolist()) == {0, 1}
    return batch


@pytest.mark.parametrize("greedy", [False, True])
def test_each_seat_of_the_current_strategy_plays_its_own_advantage_network(batch, greedy):
    model = tiny_model()
    answer_always(model.advantage_nets[0], preference(A, lowest_first=True))
    answer_always(model.advantage_nets[1], preference(A, lowest_first=False))
    lowest, highest = lowest_and_highest_legal(batch)
    expected = torch.where(batch.current_player == 0, lowest, highest)  # [B]
    assert (lowest != highest).sum() > 10  # the seats' preferences tell them apart
    agent = model.agent("current", greedy=greedy, seed=0)
    assert torch.equal(agent.act(batch), expected)
    # The arena's lockstep batches have one player to move in every game.
    for p in (0, 1):
        rows = (batch.current_player == p).nonzero().squeeze(1)
        assert torch.equal(agent.act(batch.select(rows)), expected[rows])


def test_the_current_strategy_samples_regret_matching_and_the_average_the_softmax():
    """Outputs 1 and 3 on two legal actions: regret matching plays them 1:3, a softmax
    about 1:7.4."""
    model = tiny_model()
    state = GameBatch.new(TINY, 1, seed=3)  # player 0 to move
    legal = state.legal_mask()[0]
    first, second = legal.nonzero().squeeze(1)[:2].tolist()
    outputs = torch.full((A,), -5.0)
    outputs[first], outputs[second] = 1.0, 3.0
    for net in (*model.advantage_nets, model.strategy_net):
        answer_always(net, outputs)
    many = state.select(torch.zeros(8000, dtype=torch.int64))
    expected = {
        "current": regret_matching(outputs[None], legal[None])[0],
        "average": masked_softmax(outputs[None], legal[None])[0],
    }
    for policy, probs in expected.items():
        actions = model.agent(policy, seed=1).act(many)
        share = (actions == second).float().mean().item()
        assert share == pytest.approx(probs[second].item(), abs=0.025), policy
    assert expected["current"][second] == pytest.approx(0.75)


@pytest.mark.parametrize("policy", ["average", "current"])
def test_greedy_agents_play_the_legal_action_of_highest_probability(batch, policy):
    model = tiny_model()
    torch.manual_seed(0)
    outputs = torch.randn(A)  # one preference order for every network, mixed signs
    for net in (*model.advantage_nets, model.strategy_net):
        answer_always(net, outputs)
    legal = batch.legal_mask()
    best = outputs.expand_as(legal).masked_fill(~legal, -torch.inf).argmax(1)  # [B]
    worst = outputs.expand_as(legal).masked_fill(~legal, torch.inf).argmin(1)
    assert (best != worst).sum() > 10
    assert torch.equal(model.agent(policy, greedy=True).act(batch), best)


def test_the_average_agents_policy_is_the_strategy_networks_masked_softmax(batch):
    model = tiny_model()
    legal = batch.legal_mask()
    with torch.no_grad():
        expected = masked_softmax(model.strategy_net(batch.encode()), legal)
    torch.testing.assert_close(model.agent("average").policy(batch), expected)


def test_an_unknown_policy_is_refused():
    with pytest.raises(ConfigError, match="policy='best'"):
        tiny_model().agent("best")


def test_the_agents_are_named_by_their_policy_and_sample_unless_greedy(batch):
    """``policy_agent``'s defaults: the average strategy, sampled, named after the policy;
    a given name wins, and a current-strategy agent's seats carry it with their seat."""
    model = tiny_model()
    strategy, advantages = model.strategy_net, list(model.advantage_nets)
    default = policy_agent(strategy, advantages, seed=0)
    assert default.name == "average" and default.network is strategy and not default.greedy
    current = policy_agent(strategy, advantages, "current")
    assert current.name == "current"
    assert [seat.name for seat in current.agents] == ["current_p0", "current_p1"]
    assert current_agent(advantages).name == "current"
    assert not any(seat.greedy for seat in current_agent(advantages).agents)
    named = policy_agent(strategy, advantages, "current", name="mine")
    assert named.name == "mine" and named.agents[0].name == "mine_p0"
    assert policy_agent(strategy, advantages, name="mine").name == "mine"
    assert SeatAgent(current.agents).name == "seats"
    sdcfr = functools.partial(
        policy_agent,
        strategy,
        advantages,
        "sdcfr",
        snapshots=[advantages, advantages],
        snapshot_weights=[1, 2],
    )
    assert sdcfr().name == "sdcfr" and sdcfr().agents[0].name == "sdcfr"
    assert sdcfr(name="mine").name == "mine"
    # the seed reaches SD-CFR's iterations: the same draws whatever torch's global state
    seeded_play_under_two_global_seeds(lambda: sdcfr(seed=4), batch)
