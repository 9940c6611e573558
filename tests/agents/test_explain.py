"""``explain``: agents say why they act, as labelled [B, A] tensors whose "probability" is
the policy ``act`` samples from; agents without it get a one-hot of their choice."""

import pytest
import torch
from torch import nn

from lostcities_cfr.agents import (
    Explainer,
    HeuristicAgent,
    NetworkAgent,
    NoisyAgent,
    RandomAgent,
    act_and_explain,
    explain_actions,
    random_legal_actions,
)
from lostcities_cfr.cfr import masked_softmax, regret_matching
from lostcities_cfr.game import GameBatch, Rules, feature_size

CLASSIC = Rules.classic()


def mid_game(batch_size: int = 12, moves: int = 7, seed: int = 0) -> GameBatch:
    """Games after ``moves`` random decisions: both decisions, one player to move."""
    batch = GameBatch.new(CLASSIC, batch_size, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(moves):
        batch.step(random_legal_actions(batch.legal_mask(), generator))
    return batch


def small_network(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(feature_size(CLASSIC), 16), nn.Tanh(), nn.Linear(16, 106))


@pytest.mark.parametrize("head", [masked_softmax, regret_matching])
def test_a_network_agent_explains_with_the_policy_it_samples_from(head):
    batch = mid_game()
    agent = NetworkAgent(small_network(), head, seed=0)
    reasons = agent.explain(batch)
    assert list(reasons) == ["probability"]
    assert torch.equal(reasons["probability"], agent.policy(batch))
    legal = batch.legal_mask()
    assert torch.allclose(reasons["probability"].sum(1), torch.ones(len(batch)))
    assert (reasons["probability"][~legal] == 0).all()


def test_a_network_agent_with_an_outputs_label_shows_the_networks_outputs_under_it():
    batch = mid_game()
    network = small_network()
    agent = NetworkAgent(network, regret_matching, outputs_label="advantage")
    reasons = agent.explain(batch)
    assert list(reasons) == ["probability", "advantage"]
    with torch.no_grad():
        assert torch.allclose(reasons["advantage"], network(batch.encode()))
    assert torch.equal(
        reasons["probability"], regret_matching(reasons["advantage"], batch.legal_mask())
    )


def test_the_random_agent_explains_a_uniform_policy_over_the_legal_actions():
    batch = mid_game()
    legal = batch.legal_mask()
    probability = RandomAgent(seed=0).explain(batch)["probability"]
    expected = legal.float() / legal.sum(1, keepdim=True)
    assert torch.allclose(probability, expected)


def test_a_noisy_agent_mixes_its_agents_policy_with_the_uniform_one():
    batch = mid_game()
    network = NetworkAgent(small_network(), masked_softmax, outputs_label="logit")
    noisy = NoisyAgent(network, 0.25, seed=0)
    reasons = noisy.explain(batch)
    legal = batch.legal_mask().float()
    expected = 0.75 * network.policy(batch) + 0.25 * legal / legal.sum(1, keepdim=True)
    assert torch.allclose(reasons["probability"], expected)
    assert torch.equal(reasons["logit"], network.explain(batch)["logit"])  # passed through


def test_an_agent_without_explain_gets_a_one_hot_of_the_action_it_plays():
    batch = mid_game()
    heuristic = HeuristicAgent("balanced")
    assert not isinstance(heuristic, Explainer)
    actions, reasons = act_and_explain(heuristic, batch)
    assert torch.equal(actions, heuristic.act(batch))
    assert torch.equal(reasons["probability"].argmax(1), actions)
    assert torch.equal(reasons["probability"].sum(1), torch.ones(len(batch)))
    # the heuristic is deterministic: explaining alone names the same actions
    assert torch.equal(explain_actions(heuristic, batch)["probability"], reasons["probability"])


def test_act_and_explain_returns_the_agents_own_actions_and_explanation():
    batch = mid_game()
    agent = NetworkAgent(small_network(), masked_softmax, seed=5)
    twin = NetworkAgent(agent.network, masked_softmax, seed=5)
    actions, reasons = act_and_explain(agent, batch)
    assert torch.equal(actions, twin.act(batch))  # explaining draws no random numbers
    assert torch.equal(reasons["probability"], twin.policy(batch))
