"""GAE and the PPO loss against values worked out by hand."""

import math

import pytest
import torch

from lostcities_cfr.baselines.ppo_math import (
    decision_index,
    episode_advantages,
    generalized_advantage_estimation,
    ppo_loss,
)


def test_gae_matches_hand_computed_advantages_and_ignores_steps_after_the_end():
    # Trajectory 0: three steps, reward 1 at the end. Trajectory 1: two steps, reward -1 at
    # the end, then a padding entry (reward 5, value 9) that must not leak back.
    rewards = torch.tensor([[0.0, 0.0], [0.0, -1.0], [1.0, 5.0]])
    values = torch.tensor([[0.5, 0.1], [0.2, -0.4], [0.6, 9.0]])
    terminal = torch.tensor([[False, False], [False, True], [True, True]])
    advantages = generalized_advantage_estimation(rewards, values, terminal, 1.0, 0.5)
    # 0: delta = (-0.3, 0.4, 0.4); A2 = 0.4, A1 = 0.4 + 0.5 * 0.4 = 0.6, A0 = -0.3 + 0.3 = 0
    # 1: delta = (-0.5, -0.6);     A1 = -0.6, A0 = -0.5 + 0.5 * -0.6 = -0.8
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.0, 0.6, 0.4]))
    torch.testing.assert_close(advantages[:2, 1], torch.tensor([-0.8, -0.6]))


def test_episode_advantages_put_each_games_reward_at_its_last_row_with_rows_interleaved():
    # game 0: rows 0, 2, 3 (reward 1); game 1: rows 1, 4 (reward -2), taken interleaved
    game = torch.tensor([0, 1, 0, 0, 1])
    final_reward = torch.tensor([1.0, -2.0, 1.0, 1.0, -2.0])
    values = torch.tensor([0.5, 0.1, 0.2, 0.6, -0.4])
    advantages, returns = episode_advantages(game, final_reward, values, 2, 1.0, 1.0)
    # lambda 1, gamma 1: every row's return is its game's reward
    torch.testing.assert_close(returns, final_reward)
    torch.testing.assert_close(advantages, final_reward - values)
    advantages, returns = episode_advantages(game, final_reward, values, 2, 1.0, 0.0)
    # lambda 0: the one-step TD error, V of the game's next row, the reward after its last
    torch.testing.assert_close(advantages, torch.tensor([-0.3, -0.5, 0.4, 0.4, -1.6]))
    torch.testing.assert_close(returns, advantages + values)


def test_gae_with_lambda_one_is_the_discounted_return_minus_the_value():
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.tensor([[0.3], [-0.2], [0.7]])
    terminal = torch.tensor([[False], [False], [True]])
    advantages = generalized_advantage_estimation(rewards, values, terminal, 0.9, 1.0)
    returns = torch.tensor([[1 + 0.81 * 2], [0.9 * 2], [2.0]])
    torch.testing.assert_close(advantages, returns - values)


def test_gae_with_lambda_zero_is_the_one_step_td_error():
    rewards = torch.tensor([[0.0], [3.0]])
    values = torch.tensor([[1.0], [2.0]])
    terminal = torch.tensor([[False], [True]])
    advantages = generalized_advantage_estimation(rewards, values, terminal, 0.5, 0.0)
    torch.testing.assert_close(advantages, torch.tensor([[0.5 * 2.0 - 1.0], [3.0 - 2.0]]))


def test_ppo_loss_matches_hand_computed_terms():
    # Two rows; uniform logits, so the new policy is 1/3 (three legal) and 1/2 (two legal).
    logits = torch.zeros(2, 3, requires_grad=True)
    legal = torch.tensor([[True, True, True], [True, True, False]])
    actions = torch.tensor([2, 0])
    # old probabilities make the ratios 1.5 and 0.5: both outside the clip range 0.2
    old_log_probs = torch.tensor([math.log(1 / 3) - math.log(1.5), math.log(1 / 2) - math.log(0.5)])
    advantages = torch.tensor([3.0, 1.0])  # normalised: (+1/sqrt 2, -1/sqrt 2)
    values = torch.tensor([0.5, 0.0])
    returns = torch.tensor([1.0, 0.0])
    terms = ppo_loss(
        logits, values, legal, actions, old_log_probs, advantages, returns, 0.2, 0.5, 0.01
    )
    a = 1 / math.sqrt(2)
    # row 0: -min(1.5 a, 1.2 a) = -1.2 a; row 1: -min(0.5 (-a), 0.8 (-a)) = 0.8 a
    policy = (-1.2 * a + 0.8 * a) / 2
    value = 0.5 * (0.25 + 0.0) / 2
    entropy = (math.log(3) + math.log(2)) / 2
    assert terms.policy.item() == pytest.approx(policy, abs=1e-6)
    assert terms.value.item() == pytest.approx(value)
    assert terms.entropy.item() == pytest.approx(entropy, abs=1e-6)
    assert terms.loss.item() == pytest.approx(policy + 0.5 * value - 0.01 * entropy, abs=1e-6)
    kl = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5))) / 2
    assert terms.approx_kl.item() == pytest.approx(kl, abs=1e-6)
    assert terms.clip_fraction.item() == 1.0


def test_ppo_loss_clipped_rows_give_no_policy_gradient_and_illegal_actions_none_at_all():
    logits = torch.zeros(2, 3, requires_grad=True)
    legal = torch.tensor([[True, True, True], [True, True, False]])
    actions = torch.tensor([2, 0])
    # row 0: ratio 1.5 with a positive advantage is clipped; row 1: ratio 1, unclipped
    old_log_probs = torch.tensor([math.log(1 / 3) - math.log(1.5), math.log(1 / 2)])
    terms = ppo_loss(
        logits,
        torch.zeros(2),
        legal,
        actions,
        old_log_probs,
        torch.tensor([1.0, -1.0]),
        torch.zeros(2),
        0.2,
        0.5,
        0.0,
    )
    terms.loss.backward()
    assert (logits.grad[0] == 0).all()
    assert (logits.grad[1, :2] != 0).all()
    assert logits.grad[1, 2] == 0


def test_decision_index_counts_a_players_own_decisions():
    # seat 0 decides at steps 0, 1, 4, 5, 8; seat 1 at 2, 3, 6, 7
    steps = torch.tensor([0, 1, 4, 5, 8, 2, 3, 6, 7])
    assert decision_index(steps).tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]
