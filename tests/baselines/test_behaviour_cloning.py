"""Behaviour cloning: the loss is the teacher's cross-entropy, and minimising it copies the teacher."""

import math

import pytest
import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines.behaviour_cloning import behaviour_cloning_loss, teacher_games
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.game import Rules, feature_size


def test_behaviour_cloning_loss_is_the_cross_entropy_over_legal_actions():
    logits = torch.tensor([[0.0, 0.0, 9.0], [1.0, 0.0, 0.0]])
    legal = torch.tensor([[True, True, False], [True, True, True]])
    actions = torch.tensor([1, 0])
    # row 0: the illegal 9 takes no probability, so 1/2; row 1: e / (e + 2)
    expected = (math.log(2) - math.log(math.e / (math.e + 2))) / 2
    assert behaviour_cloning_loss(logits, legal, actions).item() == pytest.approx(expected)


def test_behaviour_cloning_lowers_the_cross_entropy_to_the_teacher_on_a_fixed_batch():
    torch.manual_seed(0)
    rules = Rules.classic()
    rows = teacher_games(rules, agent_from_spec("heuristic:balanced"), 8, seed=3)
    net = NetworkConfig(64, 2).build(feature_size(rules), rules.n_actions)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)

    def loss() -> torch.Tensor:
        return behaviour_cloning_loss(net(rows.features), rows.legal, rows.actions)

    before = loss().item()
    for _ in range(150):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    after = loss().item()
    agreement = net(rows.features).masked_fill(~rows.legal, -torch.inf).argmax(1) == rows.actions
    # an untrained network is near uniform over ~10 legal actions: about log 10 = 2.3
    assert before > 1.5
    assert after < 0.2 * before
    assert agreement.float().mean() > 0.9
