"""Behaviour cloning: a policy network learns to copy a teacher agent's moves.

Supervised imitation (Pomerleau, "ALVINN", NIPS 1988; named "behavioural cloning" by Bain &
Sammut, 1995): the teacher, any agent spec (``heuristic:balanced``), plays games against
itself on the batched engine; every decision becomes a row (the mover's features and legal
mask, the teacher's action, the round's final score difference from the mover's seat), and
the policy network minimises the cross-entropy of the teacher's action under its masked
softmax. The states are the teacher's own, so the student learns where the teacher goes and
not how to recover from its own mistakes; that is what the PPO that follows is for.

The :class:`~lostcities_cfr.baselines.ppo.PPO` baseline runs it as a warm start (its first
``bc_iterations`` iterations), and fits its value network to the rows' returns meanwhile, so
that PPO starts with a critic that knows the teacher's games. The agents of agent specs play
Lost Cities, so PPO refuses a teacher in another game.
"""

from __future__ import annotations

import torch

from lostcities_cfr.agents import Agent
from lostcities_cfr.baselines.rollout import DecisionRecorder, Decisions, play_games
from lostcities_cfr.cfr.networks import masked_log_softmax
from lostcities_cfr.game import Rules
from lostcities_cfr.game.lost_cities import as_game
from lostcities_cfr.game.protocol import BatchedGames, Game


def teacher_games(
    game: Game | Rules | str,
    teacher: Agent,
    games: int,
    seed: int,
    device: str | torch.device = "cpu",
) -> Decisions:
    """Every decision of ``games`` rounds of ``teacher`` against itself, dealt from ``seed``.

    ``log_probs`` are 0 (the teacher's own probabilities are not known).
    """
    batch = as_game(game).new_batch(games, seed=seed, device=device)
    recorder = DecisionRecorder()

    def decide(batch: BatchedGames, step: int, rows: torch.Tensor) -> torch.Tensor:
        actions = teacher.act(batch)  # [B]
        live = (~batch.done).nonzero().squeeze(1)
        features, legal = batch.encode()[live], batch.legal_mask()[live]
        mover, turn = batch.current_player[live], batch.turn[live]  # [n], [n]
        recorder.add(rows[live], turn, mover, features, legal, actions[live])
        return actions

    return recorder.rows(play_games(batch, decide))


def behaviour_cloning_loss(
    logits: torch.Tensor, legal: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy of the teacher's ``actions`` [n] under ``masked_softmax(logits)``.

    ``logits`` [n, A], ``legal`` [n, A] bool; illegal actions take no probability.
    """
    return -masked_log_softmax(logits, legal).gather(1, actions[:, None]).mean()
