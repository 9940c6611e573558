"""The Deep CFR agents explain: the current strategy shows each seat's advantages beside
its regret-matching policy, SD-CFR those of the iteration its deal drew, the average
strategy its softmax."""

from __future__ import annotations

import torch
from tiny_training import positions, tiny_model

from lostcities_cfr.cfr import regret_matching
from lostcities_cfr.game import Rules
from lostcities_cfr.training.agents import SnapshotAgent

TINY = Rules.tiny()


def test_the_current_strategy_explains_each_seat_with_its_own_advantage_network():
    batch = positions(TINY)
    model = tiny_model()
    agent = model.agent("current", seed=0)
    reasons = agent.explain(batch)
    assert list(reasons) == ["probability", "advantage"]
    features, legal = batch.encode(), batch.legal_mask()
    with torch.no_grad():
        by_seat = [net(features) for net in model.advantage_nets]  # [B, A] each
    player = batch.current_player[:, None]
    expected = torch.where(player == 0, by_seat[0], by_seat[1])
    assert torch.allclose(reasons["advantage"], expected)
    assert torch.allclose(reasons["probability"], regret_matching(expected, legal))


def test_the_average_strategy_explains_with_its_policy_only():
    batch = positions(TINY)
    agent = tiny_model().agent("average", seed=0)
    reasons = agent.explain(batch)
    assert list(reasons) == ["probability"]
    assert torch.equal(reasons["probability"], agent.policy(batch))


def test_sd_cfr_explains_with_the_iteration_each_deal_drew():
    batch = positions(TINY)
    models = [tiny_model(), tiny_model()]
    agent = SnapshotAgent([m.advantage_nets for m in models], [1.0, 2.0], seed=0)
    drawn = agent._drawn(batch)
    assert set(drawn.tolist()) == {0, 1}  # both iterations play some of these deals
    reasons = agent.explain(batch)
    for k in (0, 1):
        rows = (drawn == k).nonzero().squeeze(1)
        alone = agent.agents[k].explain(batch.select(rows))
        for label in ("probability", "advantage"):
            assert torch.allclose(reasons[label][rows], alone[label])
