"""Decisions recorded as rows while :func:`~lostcities_cfr.arena.play_out` plays whole games.

Both baselines learn from rows of (features, legal mask, action) taken from games played
in lockstep on the batched engine: behaviour cloning from every decision of a teacher,
PPO from the learner's decisions against its opponents. :class:`DecisionRecorder`
collects them step by step, :meth:`DecisionRecorder.rows` joins them once the games end,
with each row's final return from the seat that took it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from lostcities_cfr.arena import Finals


@dataclass(frozen=True)
class Decisions:
    """N recorded decisions, in the order they were taken (step by step)."""

    game: torch.Tensor  # [N] int64: the game's index in the rollout's batch
    step: torch.Tensor  # [N] int64: decisions played in the game before this one
    seat: torch.Tensor  # [N] int64: the player who decided
    features: torch.Tensor  # [N, F] float32: GameBatch.encode() of that player
    legal: torch.Tensor  # [N, A] bool
    actions: torch.Tensor  # [N] int64
    log_probs: torch.Tensor  # [N] float32: log-probability of the action when it was sampled
    returns: torch.Tensor  # [N] float32: the game's final score difference, the seat's view

    def __len__(self) -> int:
        return self.actions.shape[0]

    def select(self, index: torch.Tensor) -> Decisions:
        """The rows at ``index`` ([n] int64)."""
        return Decisions(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


class DecisionRecorder:
    """Collects the rows of one lockstep game batch, one :meth:`add` per step."""

    def __init__(self) -> None:
        self._chunks: list[tuple[torch.Tensor, ...]] = []

    def add(
        self,
        game: torch.Tensor,
        step: int,
        seat: int,
        features: torch.Tensor,
        legal: torch.Tensor,
        actions: torch.Tensor,
        log_probs: torch.Tensor | None = None,
    ) -> None:
        """Record n decisions of one step: games [n], features [n, F], legal [n, A], actions [n].

        All games of a lockstep step share the player to move, hence one ``seat``.
        ``log_probs`` [n] (``None``: 0, for a teacher that does not sample).
        """
        n = game.shape[0]
        if log_probs is None:
            log_probs = torch.zeros(n, device=game.device)
        step_seat = torch.tensor([step, seat], device=game.device).expand(n, 2)
        self._chunks.append((game, step_seat, features, legal, actions, log_probs))

    def rows(self, finals: Finals) -> Decisions:
        """Every recorded row, with the final score difference from its seat (``finals``)."""
        game, step_seat, features, legal, actions, log_probs = (
            torch.cat(parts) for parts in zip(*self._chunks, strict=True)
        )
        seat = step_seat[:, 1]
        scores = finals.scores.to(game.device)[game].float()  # [N, 2]
        own = scores.gather(1, seat[:, None]).squeeze(1)
        return Decisions(
            game=game,
            step=step_seat[:, 0],
            seat=seat,
            features=features,
            legal=legal,
            actions=actions,
            log_probs=log_probs,
            returns=2 * own - scores.sum(1),  # own - other
        )
