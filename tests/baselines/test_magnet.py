"""Magnetic mirror descent's magnet (``baselines/magnet.py``): the KL divergence over legal
actions, the moving average the magnet follows, and PPO's option that adds both."""

from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch
from test_ppo_games import train

from lostcities_cfr.baselines import PPO
from lostcities_cfr.baselines.magnet import Magnet, kl_divergence
from lostcities_cfr.cfr.networks import NetworkConfig, masked_log_softmax
from lostcities_cfr.game.poker import KuhnPoker
from lostcities_cfr.training import metrics


def test_kl_divergence_is_the_sum_over_legal_actions_averaged_over_rows():
    legal = torch.tensor([[True, True, False], [True, True, True]])
    logits = torch.tensor([[0.0, math.log(3.0), 50.0], [0.0, 0.0, 0.0]])  # pi: 1/4 3/4 | thirds
    magnet = torch.tensor([[0.0, 0.0, -50.0], [0.0, math.log(2.0), math.log(3.0)]])
    first = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    second = sum(math.log((1 / 3) / (q / 6)) / 3 for q in (1, 2, 3))
    log_pi = masked_log_softmax(logits, legal)
    assert kl_divergence(log_pi, magnet, legal).item() == pytest.approx((first + second) / 2)
    log_rho = masked_log_softmax(magnet + 7.0, legal)
    assert kl_divergence(log_rho, magnet, legal).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(("decay", "share"), [(0.0, 1.0), (1.0, 0.0), (0.75, 0.25)])
def test_the_magnet_moves_towards_the_policy_by_one_minus_its_decay(decay, share):
    torch.manual_seed(0)
    policy = NetworkConfig(8, 1).build(4, 3)
    magnet = Magnet(policy, decay)
    start = [p.clone() for p in magnet.net.parameters()]
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)
    magnet.follow(policy)
    for before, now in zip(start, magnet.net.parameters(), strict=True):
        torch.testing.assert_close(now, before + share)
    assert not any(p.requires_grad for p in magnet.net.parameters())


def test_ppo_with_a_magnet_logs_its_kl_and_moves_the_magnet_each_iteration():
    pl.seed_everything(0, verbose=False)
    model = PPO(rules=KuhnPoker(), network={"width": 16, "depth": 1}, games_per_rollout=64)
    assert model.magnet is None  # magnet_coef 0: plain PPO, no magnet in its checkpoints
    model = PPO(
        rules=KuhnPoker(),
        network={"width": 16, "depth": 1},
        games_per_rollout=64,
        magnet_coef=0.5,
        magnet_decay=0.5,
    )
    initial = [p.clone() for p in model.magnet.net.parameters()]
    train(model, 2)
    assert model.iteration_metrics["mmd/magnet_kl"] > 0 and metrics.documented("mmd/magnet_kl")
    now = model.magnet.net.parameters()
    assert all(not torch.equal(a, b) for a, b in zip(initial, now, strict=True))
    assert any(name.startswith("magnet.") for name in model.state_dict())  # checkpointed
