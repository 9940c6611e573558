"""PPO's arithmetic, each piece testable on its own: GAE, the clipped loss, decision indexes.

Proximal Policy Optimization (Schulman, Wolski, Dhariwal, Radford & Klimov, "Proximal Policy
Optimization Algorithms", 2017) with generalized advantage estimation (Schulman, Moritz,
Levine, Jordan & Abbeel, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", ICLR 2016), as CleanRL's ``ppo.py`` writes them. The LightningModule that runs
them is :class:`~lostcities_cfr.baselines.ppo.PPO`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lostcities_cfr.cfr.networks import masked_log_softmax


def generalized_advantage_estimation(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminal: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """GAE(gamma, lambda) advantages [K, G] of G trajectories of up to K steps.

    ``rewards`` and ``values`` [K, G] float: the reward after step k and the value
    estimate at step k; ``terminal`` [K, G] bool: step k is its trajectory's last (no
    value follows it). Entries after a trajectory's last step are ignored.
    ``A_k = delta_k + gamma * lambda * A_{k+1}`` with
    ``delta_k = r_k + gamma * V_{k+1} - V_k`` (``V_{k+1} = 0`` after the last step).
    """
    advantages = torch.zeros_like(values)
    next_advantage = torch.zeros_like(values[0])
    next_value = torch.zeros_like(values[0])
    for k in reversed(range(values.shape[0])):
        nonterminal = (~terminal[k]).to(values.dtype)
        delta = rewards[k] + gamma * next_value * nonterminal - values[k]
        next_advantage = delta + gamma * gae_lambda * nonterminal * next_advantage
        advantages[k] = next_advantage
        next_value = values[k]
    return advantages


@dataclass(frozen=True)
class PPOLoss:
    """The terms of :func:`ppo_loss` (``loss`` is what is minimised)."""

    loss: torch.Tensor
    policy: torch.Tensor  # the clipped surrogate, negated
    value: torch.Tensor  # half the mean squared error of the value
    entropy: torch.Tensor  # mean entropy of the masked softmax
    approx_kl: torch.Tensor  # mean (ratio - 1) - log ratio (Schulman's k3 estimator)
    clip_fraction: torch.Tensor  # share of rows with |ratio - 1| > clip
    log_probs: torch.Tensor  # [n, A] the policy's masked log-softmax (MMD's KL reuses it)


def ppo_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    legal: torch.Tensor,
    actions: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    clip: float,
    value_coef: float,
    entropy_coef: float,
) -> PPOLoss:
    """PPO's loss on one minibatch of n rows.

    ``logits`` [n, A] and ``legal`` [n, A] bool (the policy is their masked softmax),
    ``values`` [n] the value network's outputs, ``actions`` [n] the actions taken and
    ``old_log_probs`` [n] their log-probabilities when they were sampled, ``advantages``
    [n] (normalised here to mean 0 and standard deviation 1), ``returns`` [n] the value
    targets. ``loss = -min(ratio * A, clip(ratio, 1 - clip, 1 + clip) * A)
    + value_coef * (V - R)^2 / 2 - entropy_coef * entropy``, every term a mean.
    """
    log_probs = masked_log_softmax(logits, legal)  # [n, A]
    new_log_probs = log_probs.gather(1, actions[:, None]).squeeze(1)
    log_ratio = new_log_probs - old_log_probs
    ratio = log_ratio.exp()
    if advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    policy = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)).mean()
    value = 0.5 * (values - returns).square().mean()
    # illegal entries: probability 0 times a huge negative log, masked out to stay exact
    entropy = -(log_probs.exp() * log_probs).masked_fill(~legal, 0.0).sum(1).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1).abs() > clip).float().mean()
    return PPOLoss(
        loss=policy + value_coef * value - entropy_coef * entropy,
        policy=policy,
        value=value,
        entropy=entropy,
        approx_kl=approx_kl,
        clip_fraction=clip_fraction,
        log_probs=log_probs,
    )


def decision_index(step: torch.Tensor) -> torch.Tensor:
    """A player's k-th own decision of a Lost Cities round from the round's step:
    ``step // 4 * 2 + step % 2``.

    A turn is two decisions of one player (card, then draw), so a player decides at
    steps 4j and 4j + 1 (seat 0) or 4j + 2 and 4j + 3 (seat 1). Where who moves depends
    on the play (poker), :func:`order_in_game` counts the same from the rows themselves.
    """
    return step // 4 * 2 + step % 2


def order_in_game(game: torch.Tensor, n_games: int) -> torch.Tensor:
    """[N] int64: each row's index among the rows of its game, rows in the order taken.

    ``game`` [N] int64 in ``0..n_games-1``: the game of each row. On the learner's rows of
    a rollout this is its k-th own decision of the game, whatever the game's order of
    play; on Lost Cities it equals :func:`decision_index` of the rows' steps.
    """
    order = torch.sort(game, stable=True).indices  # [N]: game by game, each in row order
    counts = torch.bincount(game, minlength=n_games)  # [G]
    starts = counts.cumsum(0) - counts  # [G]: first sorted position of each game
    sorted_game = game[order]
    index = torch.empty_like(game)
    index[order] = torch.arange(len(game), device=game.device) - starts[sorted_game]
    return index


def episode_advantages(
    game: torch.Tensor,
    final_reward: torch.Tensor,
    values: torch.Tensor,
    n_games: int,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and value targets [N] of one player's rows of ``n_games`` games whose
    only reward comes at the end.

    ``game`` [N] int64: each row's game, rows in the order taken; ``final_reward`` [N]: the
    reward of the row's game (read at each game's last row); ``values`` [N]: the value
    estimate at each row. The rows go into [K, G] tables (a game's k-th row) for
    :func:`generalized_advantage_estimation`, the reward at each game's last row.
    """
    k = order_in_game(game, n_games)  # [N]
    K = int(k.max()) + 1
    last = torch.zeros(n_games, dtype=torch.int64, device=k.device).scatter_reduce_(
        0, game, k, "amax"
    )
    table = torch.zeros(K, n_games, device=values.device)
    table_values = table.index_put((k, game), values)
    is_last = k == last[game]
    rewards = table.index_put((k[is_last], game[is_last]), final_reward[is_last])
    terminal = torch.zeros(K, n_games, dtype=torch.bool, device=k.device)
    terminal[last, torch.arange(n_games, device=k.device)] = True
    advantages = generalized_advantage_estimation(
        rewards, table_values, terminal, gamma, gae_lambda
    )[k, game]
    return advantages, advantages + values


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target): 1 for a perfect critic, 0 for a constant."""
    variance = float(target.var())
    return float("nan") if variance == 0 else 1.0 - float((target - predicted).var()) / variance
