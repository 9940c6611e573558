"""Deep DCFR+'s bootstrapped targets: DCFR's discount, the update rule against a per-entry
reference, the rewrite of a buffer's rows (held-out ones too), and the buffer's clear."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lostcities_cfr.cfr import ReservoirBuffer
from lostcities_cfr.cfr.cumulative_regret import bootstrap_targets, cumulative_targets, discount

F, A = 3, 4


def test_discount_is_dcfrs_and_its_limits():
    assert discount(0, 1.5) == 0.0  # nothing to carry before the first iteration
    assert discount(3, 1.0) == pytest.approx(3 / 4)  # alpha = 1: linear CFR's t / (t + 1)
    assert discount(4, 1.5) == pytest.approx(8 / 9)
    assert discount(4, 0.0) == pytest.approx(1 / 2)
    assert discount(4, math.inf) == 1.0  # CFR+: the positive part carried whole


def reference_targets(previous, regrets, legal, iteration, alpha):
    """R_T / T entry by entry, from R_{T-1} / (T - 1) (the module docstring's rule)."""
    out = torch.zeros_like(regrets)
    for i in range(regrets.shape[0]):
        for a in range(regrets.shape[1]):
            if not legal[i, a]:
                continue
            before = iteration - 1
            cumulative_before = before * float(previous[i, a])  # R_{T-1}
            d = 0.0 if before == 0 else before**alpha / (before**alpha + 1)
            out[i, a] = (d * max(cumulative_before, 0.0) + float(regrets[i, a])) / iteration
    return out


@pytest.mark.parametrize("iteration", [1, 2, 7])
@pytest.mark.parametrize("alpha", [1.5, 0.0])
def test_cumulative_targets_follow_the_rule_entry_by_entry(iteration, alpha):
    generator = torch.Generator().manual_seed(iteration)
    previous = torch.randn(5, A, generator=generator)
    legal = torch.rand(5, A, generator=generator) < 0.7
    regrets = torch.where(legal, torch.randn(5, A, generator=generator), 0.0)
    got = cumulative_targets(previous, regrets, legal, iteration, alpha)
    expected = reference_targets(previous, regrets, legal, iteration, alpha)
    torch.testing.assert_close(got, expected)


def fixed_network() -> nn.Module:
    """A linear network whose outputs are easy to recompute: sum of features times 1..A."""
    net = nn.Linear(F, A, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.arange(1.0, A + 1)[:, None].expand(A, F))
    return net


def test_bootstrap_rewrites_every_held_row_and_the_held_out_ones():
    buffer = ReservoirBuffer(64, F, A, holdout=0.3, target_dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(40, F, generator=generator)
    legal = torch.rand(40, A, generator=generator) < 0.8
    regrets = torch.where(legal, torch.randn(40, A, generator=generator), 0.0)
    buffer.add(features, legal, regrets, 3)
    held, held_out = len(buffer), len(buffer.held_out)
    assert held > 0 and held_out > 0
    before = {
        name: (b.features[: len(b)].float(), b.legal[: len(b)].clone(), b.targets[: len(b)].clone())
        for name, b in (("main", buffer), ("held_out", buffer.held_out))
    }
    net = fixed_network()
    bootstrap_targets(buffer, net, iteration=3, alpha=1.5, chunk=7)  # several chunks
    for name, b in (("main", buffer), ("held_out", buffer.held_out)):
        x, mask, r = before[name]
        expected = cumulative_targets(net(x), r, mask, 3, 1.5)
        torch.testing.assert_close(b.targets[: len(b)], expected, msg=name)
    assert len(buffer) == held and len(buffer.held_out) == held_out


def test_bootstrap_at_the_first_iteration_keeps_the_sampled_regrets():
    buffer = ReservoirBuffer(8, F, A, target_dtype=torch.float32)
    legal = torch.ones(4, A, dtype=torch.bool)
    regrets = torch.randn(4, A, generator=torch.Generator().manual_seed(1))
    buffer.add(torch.randn(4, F), legal, regrets, 1)
    bootstrap_targets(buffer, fixed_network(), iteration=1, alpha=1.5)
    torch.testing.assert_close(buffer.targets[:4], regrets)


def test_a_cleared_buffer_holds_nothing_and_refills_from_its_first_slot():
    buffer = ReservoirBuffer(4, F, A, holdout=0.5)
    buffer.add(torch.zeros(6, F), torch.ones(6, A, dtype=torch.bool), torch.zeros(6, A), 1)
    assert len(buffer) == 4
    buffer.clear()
    assert len(buffer) == 0 and len(buffer.held_out) == 0 and buffer.n_seen == 0
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(2)
    buffer.add(torch.ones(1, F), torch.ones(1, A, dtype=torch.bool), torch.ones(1, A), 2)
    assert len(buffer) + len(buffer.held_out) == 1
