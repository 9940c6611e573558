"""What the value-baseline samplers share: the history value network, the traverser's
sampling policy, and the value of every child of a decision.

:class:`~lostcities_cfr.cfr.escher.ESCHERSampling` and
:class:`~lostcities_cfr.cfr.baseline_outcome_sampling.BaselineOutcomeSampling` both value a
decision's actions by a learned history value network ``V(s)``, evaluated on the
decision's children: ``V`` sees the whole state (both hands, and the deck's contents but
not its order: ``BatchedGames.encode_history``) and estimates the
return of the player to move there when both players follow the current strategy
``sigma``. The training module builds the network when a sampler names it
(:attr:`ValueBaselineSampler.value_network`), registers it in the inference queue under that
name, and trains it on ``TraversalContext.value_buffer``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    LeftOpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.cfr.traversal import Sampler, TraversalContext, static_rows
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.game.protocol import BatchedGames
from lostcities_cfr.inference import InferenceQueue, Ticket

VALUE_NETWORK = "value"  # the queue name of the history value network


def value_mask(rows: torch.Tensor) -> torch.Tensor:
    """The value network's legal mask: its single output, for every row [n, 1]."""
    return torch.ones(len(rows), 1, dtype=torch.bool, device=rows.device)


def submit_state_values(queue: InferenceQueue, games: BatchedGames, rows: torch.Tensor) -> Ticket:
    """Queue ``V`` of the games at ``rows`` [n] (for their player to move); result [n, 1]."""
    return queue.submit(VALUE_NETWORK, games.select(rows).encode_history(), value_mask(rows))


class ValueBaselineSampler(Sampler):
    """A sampler whose traverser plays a fixed sampling policy and values actions by ``V``.

    Args:
        walkers: trajectories run concurrently (deals per batch).
        utility_scale: utilities (score differences) are divided by it.
        exploration: weight of uniform play in the traverser's sampling policy ``mu``;
            above 0, so that every legal action is sampled sometimes.
        guide: agent spec whose action gets ``guide_weight`` in ``mu``, so that
            trajectories visit the states a sensible player reaches; None for none.
        guide_weight: its weight; the rest of ``mu`` is ``sigma``.
        max_decisions: cut trajectories after this many decisions without a penalty (the
            cut state's value ``V`` is its return); None never cuts.
    """

    value_network = VALUE_NETWORK

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 100.0,
        exploration: LeftOpenUnitInterval = 0.2,
        guide: str | None = "heuristic:balanced",
        guide_weight: ClosedUnitInterval = 0.4,
        max_decisions: PositiveInt | None = 300,
    ) -> None:
        super().__init__(walkers, utility_scale)
        name = type(self).__name__
        # Each field's own range is its annotation's (checked); these relate two fields.
        if guide_weight > 1 - exploration:
            raise ConfigError(
                f"{name} guide_weight={guide_weight}; it must lie in [0, 1 - exploration]"
            )
        if guide is None and guide_weight > 0:
            raise ConfigError(f"{name} guide_weight > 0 needs a guide agent spec")
        try:
            self._guide = None if guide is None else agent_from_spec(guide, seed=0)
        except AgentSpecError as error:
            raise ConfigError(f"{name} guide: {error}") from None
        self.exploration = exploration
        self.guide = guide
        self.guide_weight = guide_weight
        self.max_decisions = max_decisions

    def traverse_games(self, games: BatchedGames, context: TraversalContext) -> None:
        if context.value_buffer is None:
            raise ConfigError(
                f"{type(self).__name__} needs a history value network and its buffer; the "
                "training module builds them when the sampler has `value_network`"
            )
        super().traverse_games(games, context)

    def sampling_policy(
        self, games: BatchedGames, rows: torch.Tensor, sigma: torch.Tensor, legal: torch.Tensor
    ) -> torch.Tensor:
        """The traverser's sampling policy ``mu`` [n, A] at the games ``rows`` [n] of ``games``,
        given their ``sigma`` and ``legal`` ([n, A])."""
        mu = self.exploration * uniform_strategy(sigma, legal)
        mu += (1 - self.exploration - self.guide_weight) * sigma
        if self._guide is not None and self.guide_weight > 0:
            # Lockstep games share the player to move, so the guide's batch is the whole
            # batch (finished games answer with an action nobody plays).
            guided = self._guide.act(games)[rows]  # [n]
            mu[torch.arange(len(rows), device=mu.device), guided] += self.guide_weight
        return mu * legal

    def playing_policy(
        self, games: BatchedGames, rows: torch.Tensor, sigma: torch.Tensor, legal: torch.Tensor
    ) -> torch.Tensor:
        """What every walker plays [b, A]: ``sigma`` [b, A], with the sampling policy at the
        traverser's ``rows`` [n] that explore."""
        if not len(rows):
            return sigma
        probs = sigma.clone()
        probs[rows] = self.sampling_policy(games, rows, sigma[rows], legal[rows])
        return probs

    def cut(self, turn: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
        """[b] bool: the live trajectories past ``max_decisions``."""
        if self.max_decisions is None:
            return torch.zeros_like(alive)
        return alive & (turn >= self.max_decisions)

    def submit_children_values(
        self,
        queue: InferenceQueue,
        games: BatchedGames,
        rows: torch.Tensor,
        legal: torch.Tensor,
        traverser: int,
        count: int | None = None,
    ) -> Callable[[], torch.Tensor]:
        """Queue the value of every legal child of the games at ``rows`` [n] (``legal``
        [n, A], n > 0); returns a function giving them [n, A] for ``traverser`` once the
        queue has run (0 at illegal actions). Children where the round ends get their
        score. A deck draw's child holds the card the walker's deck holds next: one sample
        of the draw, unbiased over traversals since the deck's order is uniformly random
        given what the traverser knows. ``count``, the number of legal actions in
        ``legal`` if read already, spares a host synchronisation."""
        n, A = legal.shape
        if count is None:
            parent, action = legal.nonzero(as_tuple=True)  # [c] one per child
        else:
            child = static_rows(legal.view(-1), count, games.compiled)  # [c]
            parent, action = child // A, child % A
        children = games.select(rows[parent])
        children.step(action, check=False)
        ticket = queue.submit(VALUE_NETWORK, children.encode_history(), value_mask(parent))
        # The network values a child for its player to move: the traverser's side is the
        # opposite where the opponent moves next.
        side = torch.where(children.current_player == traverser, 1.0, -1.0)  # [c]
        ended = children.done
        final = self.utility(children, traverser)  # [c] exact where the round ended

        def values() -> torch.Tensor:
            value = torch.where(ended, final, side * ticket.result()[:, 0].float())
            q = torch.zeros(n, A, device=legal.device)
            q[parent, action] = value
            return q

        return values
