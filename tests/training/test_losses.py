"""Linear CFR weighting and the losses of the advantage and strategy networks."""

import pytest
import torch

from lostcities_cfr.training.losses import advantage_loss, iteration_weights, strategy_loss


@pytest.mark.parametrize("exponent", [0.0, 1.0, 1.5, 2.0])
def test_iteration_weights_are_proportional_to_iteration_power_and_sum_to_one(exponent):
    iteration = torch.tensor([1, 2, 4, 4], dtype=torch.int32)
    weights = iteration_weights(iteration, exponent)
    expected = torch.tensor([1.0, 2.0, 4.0, 4.0]) ** exponent
    torch.testing.assert_close(weights, expected / expected.sum())


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0])
def test_predictive_weights_count_the_newest_rows_at_the_next_iterations_weight_too(exponent):
    iteration = torch.tensor([1, 2, 3, 3], dtype=torch.int32)
    weights = iteration_weights(iteration, exponent, newest=3)
    expected = torch.tensor([1.0, 2.0, 3.0, 3.0]) ** exponent
    expected[2:] += 4.0**exponent
    torch.testing.assert_close(weights, expected / expected.sum())


def test_predictive_fit_is_the_regret_plus_its_prediction():
    # One information set, rows of iterations 1 and 2 (linear weights): the fitted mean
    # with newest=2 is proportional to R_2 + 3 * r_2 = (1 * r_1 + 2 * r_2) + 3 * r_2.
    r1, r2 = torch.tensor([[1.0, -2.0]]), torch.tensor([[-1.0, 3.0]])
    regrets, legal = torch.cat([r1, r2]), torch.ones(2, 2, dtype=torch.bool)
    outputs = torch.zeros(1, 2, requires_grad=True)
    optimizer = torch.optim.SGD([outputs], lr=0.2)
    for _ in range(300):
        optimizer.zero_grad()
        advantage_loss(
            outputs.expand(2, 2), legal, regrets, torch.tensor([1, 2]), 1.0, 2
        ).backward()
        optimizer.step()
    predicted = 1 * r1 + 2 * r2 + 3 * r2
    torch.testing.assert_close(outputs.detach(), predicted / 6)  # weights' sum: 1 + 2 + 3


def test_advantage_loss_is_the_weighted_squared_error_over_legal_actions():
    outputs = torch.tensor([[1.0, 2.0, 50.0], [0.0, -1.0, 3.0]])
    legal = torch.tensor([[True, True, False], [True, True, True]])
    regrets = torch.tensor([[0.0, 4.0, 0.0], [1.0, 1.0, 1.0]])
    iteration = torch.tensor([1, 3])
    # row 0: (1-0)^2 + (2-4)^2 = 5 (the illegal 50 counts for nothing); row 1: 1 + 4 + 4 = 9
    expected = (1 * 5 + 3 * 9) / 4
    assert advantage_loss(outputs, legal, regrets, iteration, 1.0).item() == pytest.approx(expected)
    assert advantage_loss(outputs, legal, regrets, iteration, 0.0).item() == pytest.approx(7.0)


def test_advantage_loss_gives_illegal_outputs_no_gradient():
    outputs = torch.zeros(2, 3, requires_grad=True)
    legal = torch.tensor([[True, False, True], [False, True, True]])
    advantage_loss(outputs, legal, torch.ones(2, 3) * legal, torch.tensor([1, 2])).backward()
    assert (outputs.grad[~legal] == 0).all()
    assert (outputs.grad[legal] != 0).all()


def test_strategy_loss_is_minimised_by_the_iteration_weighted_average_strategy():
    # One information set seen at iterations 1 and 3 with two different strategies: linear
    # CFR's average is (1 * s1 + 3 * s3) / 4 over the legal actions.
    legal = torch.tensor([[True, True, False, True]] * 2)
    strategies = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.2, 0.4, 0.0, 0.4]])
    iteration = torch.tensor([1, 3])
    logits = torch.zeros(1, 4, requires_grad=True)
    optimizer = torch.optim.Adam([logits], lr=0.05)
    for _ in range(2000):
        optimizer.zero_grad()
        strategy_loss(logits.expand(2, 4), legal, strategies, iteration, 1.0).backward()
        optimizer.step()
    predicted = torch.softmax(logits.detach().masked_fill(~legal[:1], -torch.inf), dim=-1)
    average = (1 * strategies[0] + 3 * strategies[1]) / 4
    torch.testing.assert_close(predicted[0], average, atol=2e-3, rtol=0)


def test_strategy_loss_ignores_illegal_logits():
    legal = torch.tensor([[True, False, True]])
    strategies = torch.tensor([[0.5, 0.0, 0.5]])
    low = strategy_loss(torch.tensor([[0.0, -9.0, 0.0]]), legal, strategies, torch.tensor([2]))
    high = strategy_loss(torch.tensor([[0.0, 9.0, 0.0]]), legal, strategies, torch.tensor([2]))
    assert low.item() == pytest.approx(high.item())
    assert low.item() == pytest.approx(torch.log(torch.tensor(2.0)).item())
