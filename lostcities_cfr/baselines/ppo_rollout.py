"""PPO's rollout phase: the rows an iteration trains on, from the learner's games against its
opponents (its pool of past policies, or the fixed opponent) or the teacher's own games.

:class:`PPORollout` is the part of :class:`~lostcities_cfr.baselines.ppo.PPO` that plays
(``on_train_epoch_start`` calls it): it deals from the rollout generator, draws the pool's
snapshots into the opponents' networks, plays the games
(:func:`~lostcities_cfr.baselines.rollout.learner_rollout`, or
:func:`~lostcities_cfr.baselines.behaviour_cloning.teacher_games` while cloning), and turns
each game's return into rewards, value targets and GAE advantages. The update phase only
reads the :class:`Rows` it returns, which is why the two live apart; ``rollout.py`` is what
PPO shares with expert iteration: games played out with their decisions recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from lostcities_cfr.baselines.behaviour_cloning import teacher_games
from lostcities_cfr.baselines.ppo_math import episode_advantages, explained_variance
from lostcities_cfr.baselines.rollout import LEARNER, Decisions, learner_rollout
from lostcities_cfr.cfr.networks import masked_softmax

# Rollouts deal from seeds below this; deals from seeds at or above it were never trained on
# (the held-out games of an approximate best response).
TRAINING_DEAL_SEEDS = 2**62


@dataclass
class Rows:
    """One iteration's training rows (for BC, ``advantages`` stay unused)."""

    features: torch.Tensor  # [N, F] float32
    legal: torch.Tensor  # [N, A] bool
    actions: torch.Tensor  # [N] int64
    log_probs: torch.Tensor  # [N] float32, at sampling time
    advantages: torch.Tensor  # [N] float32
    returns: torch.Tensor  # [N] float32: value targets

    def __len__(self) -> int:
        return self.actions.shape[0]


class PPORollout:
    """The rollout phase of ``PPO`` (module docstring), mixed into it.

    What it uses of the module: ``hparams``, ``game`` and ``rules``, ``teacher``,
    ``opponent``, ``pool`` and ``_opponent_nets``, ``network_config``, ``queue``,
    ``policy_net`` and ``value_net``, ``rollout_generator``, ``iteration_metrics`` and
    Lightning's ``device``.
    """

    def clone_teacher(self) -> Rows:
        """Play the teacher against itself; its moves and returns as training rows."""
        start = time.perf_counter()
        rows = teacher_games(
            self.game, self.teacher, self.hparams.games_per_rollout, self._deal_seed(), self.device
        )
        seconds = time.perf_counter() - start
        self.iteration_metrics = {
            "rollout/games": float(self.hparams.games_per_rollout),
            "rollout/decisions": float(len(rows)),
            "rollout/decisions_per_s": len(rows) / seconds,
            "rollout/game_length": len(rows) / self.hparams.games_per_rollout / 2,
        }
        zeros = torch.zeros_like(rows.returns)
        return Rows(
            rows.features, rows.legal, rows.actions, zeros, zeros, self.reward(rows.returns)
        )

    def rollout(self) -> Rows:
        """Play the learner against its opponents; its rows with GAE advantages."""
        if self.opponent is None and not self.pool:
            self.pool.append(self._snapshot())
        start = time.perf_counter()
        decisions, n_decisions = learner_rollout(
            self.game,
            self.queue,
            [self.opponent] if self.opponent is not None else self._draw_opponents(),
            self.hparams.games_per_rollout,
            self._deal_seed(),
            self.rollout_generator,
            self.device,
        )
        seconds = time.perf_counter() - start
        values = torch.cat([self.value_net(f).squeeze(1) for f in decisions.features.split(8192)])
        advantages, returns = self.advantages(decisions, values)
        games = self.hparams.games_per_rollout
        # every game's final return, once (each game's learner rows share it)
        final = torch.zeros(games, device=self.device).index_put_(
            (decisions.game,), decisions.returns
        )
        self.iteration_metrics = {
            "rollout/games": float(games),
            "rollout/decisions": float(n_decisions),
            "rollout/learner_decisions": float(len(decisions)),
            "rollout/decisions_per_s": n_decisions / seconds,
            "rollout/game_length": n_decisions / games / 2,
            "rollout/score_diff": float(final.mean()),
            "rollout/win_rate": float((final > 0).float().mean()),
            "ppo/explained_variance": explained_variance(values, returns),
            "ppo/pool_size": float(len(self.pool)),
        }
        return Rows(
            decisions.features,
            decisions.legal,
            decisions.actions,
            decisions.log_probs,
            advantages,
            returns,
        )

    def reward(self, score_diff: torch.Tensor) -> torch.Tensor:
        """The reward of a round's final score difference (``reward_scale``, ``win_bonus``)."""
        return score_diff / self.hparams.reward_scale + self.hparams.win_bonus * score_diff.sign()

    def advantages(
        self, decisions: Decisions, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE advantages and value targets [N] of the learner's rows, game by game: the
        reward of each game's return at its last row (:func:`episode_advantages`)."""
        return episode_advantages(
            decisions.game,
            self.reward(decisions.returns),
            values,
            self.hparams.games_per_rollout,
            self.hparams.gamma,
            self.hparams.gae_lambda,
        )

    # ---- helpers --------------------------------------------------------------------------------
    def _deal_seed(self) -> int:
        return int(
            torch.randint(
                TRAINING_DEAL_SEEDS, (), generator=self.rollout_generator, device=self.device
            )
        )

    def _snapshot(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.policy_net.state_dict().items()}

    def _draw_opponents(self) -> list[str]:
        """Queue names of this rollout's opponents; pool snapshots loaded into their networks."""
        groups = self.hparams.opponent_groups
        n_latest = round(self.hparams.latest_share * groups)
        draws = torch.randint(
            len(self.pool),
            (groups - n_latest,),
            generator=self.rollout_generator,
            device=self.device,
        ).tolist()
        F, A = self.game.feature_size, self.game.n_actions
        names = [LEARNER] * n_latest
        for j, draw in enumerate(draws):
            if j == len(self._opponent_nets):
                net = (
                    self.network_config.build(F, A, self.rules)
                    .to(self.device)
                    .requires_grad_(False)
                )
                self._opponent_nets.append(net)
                self.queue.register(f"opponent_{j}", net, masked_softmax)
            self._opponent_nets[j].load_state_dict(self.pool[draw])
            names.append(f"opponent_{j}")
        return names
