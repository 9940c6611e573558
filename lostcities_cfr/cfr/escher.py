"""ESCHER: regrets read off a learned history value function, with no importance weights.

McAleer, Farina, Lanctot & Sandholm, "ESCHER: Eschewing Importance Sampling in Games by
Computing a History Value Function to Estimate Regret" (ICLR 2023).

Each traversal is one trajectory. The opponent plays its current strategy ``sigma``; the
traverser plays a fixed *sampling policy* ``mu`` with full support (a mixture of uniform
play, a guide agent such as ``heuristic:balanced``, and ``sigma`` itself). The history
value network ``V(s)`` sees the whole state (both hands, and the deck's contents but not
its order: :func:`~lostcities_cfr.game.encoding.encode_history`) and estimates the return
of the player to move when both players follow ``sigma`` from ``s`` on. At a traverser
decision ``h`` every legal action ``a`` is tried on a copy of the game, and the child
``h.a`` is valued by the network (by its score where the round ends there), from the
traverser's side: ``q(a) = V(h.a)``, negated where the opponent moves in ``h.a``. The
decision yields the advantage row

    r(a) = q(a) - sum_b sigma(b) q(b)        for every legal a,

and every opponent decision a strategy row, as in Deep CFR. This is ESCHER's estimator
with its history value function evaluated on the children (its reference code's
"all actions" mode): one network of states, trained on every state it sees, rather than
one output per action trained only where that action was taken. No playout and no
importance weight enters a row: its noise is the value network's error, not the luck of
a playout, and every traverser decision pays for itself: about two trajectory nodes and
a child per legal action per advantage row, against ~1,500 nodes for
:class:`~lostcities_cfr.cfr.budgeted_sampling.BudgetedSampling`. A deck draw's child
holds the card the walker's deck holds next: one sample of the draw, unbiased over
traversals, since the deck's order is uniformly random given what the traverser knows.

The value network learns from the same trajectories, as ESCHER's reference code does:
each trajectory switches to *on-policy* play at a decision ``k`` drawn uniformly from
``[0, switch_range)``. Before ``k`` it samples as above and writes advantage rows; the
action at ``k`` is still drawn from the sampling policy (an exploring action), and from
then on both players follow ``sigma``. So the round's final score difference is an
unbiased sample of ``V(s_t)`` for every state ``s_t`` after decision ``k`` (the first of
them an exploring child, the kind of state the advantage rows value), and those states
become the value rows; states before, whose continuation was not ``sigma``'s, teach the
value network nothing. ``docs/algorithms.md`` states the estimator and its biases.

Rounds that drag on (players trading discard piles) are cut after ``max_decisions``
decisions without a penalty: the value rows of a cut trajectory take ``V`` of the state
where it stopped as their return, and the cut share is reported
(``TraversalStats.truncated``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.cfr.traversal import (
    Sampler,
    TraversalContext,
    current_strategies,
    live_rows,
    sample_actions,
)
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.encoding import encode_history
from lostcities_cfr.inference import InferenceQueue

VALUE_NETWORK = "value"  # the queue name of the history value network


class ESCHERSampling(Sampler):
    """ESCHER's trajectory sampling with a learned history value baseline (module docstring).

    The training module builds the history value network (``DeepCFR.value_network``),
    registers it in the queue as ``"value"`` and trains it on ``context.value_buffer``.

    Args:
        walkers: trajectories run concurrently (deals per batch).
        utility_scale: utilities (score differences) are divided by it.
        exploration: weight of uniform play in the traverser's sampling policy; above 0,
            so that every legal action is sampled sometimes.
        guide: agent spec whose action gets ``guide_weight`` in the sampling policy, so
            that trajectories visit the states a sensible player reaches; None for none.
        guide_weight: its weight; the rest of the sampling policy is ``sigma``.
        switch_range: each trajectory turns on-policy at a decision drawn uniformly from
            ``[0, switch_range)`` (module docstring): larger values write more advantage
            rows and fewer value rows per trajectory.
        td_lambda: the value targets' TD(lambda): 1 takes the round's outcome, smaller
            values lean on the value network's own estimates of the later states (less
            noise from the cards still to come, more bias while the network is wrong).
        max_decisions: cut trajectories after this many decisions (penalty-free, see the
            module docstring); None never cuts.
    """

    value_network = VALUE_NETWORK

    def __init__(
        self,
        walkers: int = 1024,
        utility_scale: float = 100.0,
        exploration: float = 0.2,
        guide: str | None = "heuristic:balanced",
        guide_weight: float = 0.4,
        switch_range: int = 120,
        td_lambda: float = 1.0,
        max_decisions: int | None = 300,
    ) -> None:
        super().__init__(walkers, utility_scale)
        if not 0 < exploration <= 1:
            raise ConfigError(f"ESCHERSampling exploration={exploration}; it must lie in (0, 1]")
        if not 0 <= guide_weight <= 1 - exploration:
            raise ConfigError(
                f"ESCHERSampling guide_weight={guide_weight}; it must lie in [0, 1 - exploration]"
            )
        if not 0 <= td_lambda <= 1:
            raise ConfigError(f"ESCHERSampling td_lambda={td_lambda}; it must lie in [0, 1]")
        if switch_range < 1:
            raise ConfigError(f"ESCHERSampling switch_range={switch_range}; it must be at least 1")
        if max_decisions is not None and max_decisions < 1:
            raise ConfigError(
                f"ESCHERSampling max_decisions={max_decisions}; it must be at least 1, or None"
            )
        if guide is None and guide_weight > 0:
            raise ConfigError("ESCHERSampling guide_weight > 0 needs a guide agent spec")
        try:
            self._guide = None if guide is None else agent_from_spec(guide, seed=0)
        except AgentSpecError as error:
            raise ConfigError(f"ESCHERSampling guide: {error}") from None
        self.exploration = exploration
        self.guide = guide
        self.guide_weight = guide_weight
        self.switch_range = switch_range
        self.td_lambda = td_lambda
        self.max_decisions = max_decisions

    def sampling_policy(
        self, games: GameBatch, rows: torch.Tensor, sigma: torch.Tensor, legal: torch.Tensor
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

    def walk(self, games: GameBatch, context: TraversalContext) -> None:
        if context.value_buffer is None:
            raise ConfigError(
                "ESCHERSampling needs a history value network and its buffer; the training "
                "module builds them when the sampler has `value_network`"
            )
        B, device = games.batch_size, games.device
        traverser, queue, generator = context.traverser, context.queue, context.generator
        games = games.clone()
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        # The decision at which each trajectory turns on-policy (counted from its start).
        switch = games.turn + torch.randint(
            self.switch_range, (B,), generator=generator, device=device
        )  # [b]
        # On-policy states wait here for their trajectory's outcome: (walker, history
        # features, +1/-1 for the player to move being player 0 / 1, V(s) for player 0).
        value_rows: list[tuple[torch.Tensor, ...]] = []
        outcome = torch.zeros(B, device=device)  # [B] player 0's final return, or V at a cut

        while (next_rows := live_rows(games, [walker, switch])) is not None:
            games, (walker, switch), alive, live = next_rows
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            turn, mover = games.turn, games.current_player  # [b] each
            to_player0 = 1.0 - 2.0 * mover.float()  # [b] +1 where player 0 moves
            cut = torch.zeros_like(alive)
            if self.max_decisions is not None:
                cut = alive & (turn >= self.max_decisions)
            # V of the on-policy states (value rows, and their TD targets) and of the cut ones
            # (their trajectory's return), in the same flush as the strategies.
            valued = (alive & ((turn > switch) | cut)).nonzero().squeeze(1)
            if len(valued):
                history = encode_history(games.select(valued))  # [v, H]
                value_ticket = queue.submit(VALUE_NETWORK, history, _one(valued))
            mine = alive & ~cut & (mover == traverser)
            sampled = (mine & (turn < switch)).nonzero().squeeze(1)  # advantage rows
            if len(sampled):
                children = self._children(games, sampled, legal[sampled], traverser, queue)
            sigma = current_strategies(queue, games, features, legal, live)  # [b, A]
            context.stats.nodes += len(live)

            if len(valued):
                value = to_player0[valued] * value_ticket.result()[:, 0].float()  # player 0's
                is_cut = cut[valued]
                outcome[walker[valued[is_cut]]] = value[is_cut]
                kept = ~is_cut
                value_rows.append(
                    (
                        walker[valued[kept]],
                        history[kept].half(),
                        to_player0[valued[kept]],
                        value[kept],
                    )
                )
            if cut.any():
                context.stats.truncated += int(cut.sum())
                games.done = games.done | cut
                alive = alive & ~cut
            if len(sampled):
                q = children()  # [n, A] the children's values for the traverser
                regrets = q - (sigma[sampled] * q).sum(1, keepdim=True)
                context.add_advantage_rows(
                    features[sampled], legal[sampled], regrets * legal[sampled]
                )
            theirs = (alive & (mover != traverser)).nonzero().squeeze(1)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            probs = sigma  # [b, A]: sigma, or the sampling policy where the traverser explores
            explorers = (mine & (turn <= switch)).nonzero().squeeze(1)
            if len(explorers):
                probs = sigma.clone()
                probs[explorers] = self.sampling_policy(
                    games, explorers, sigma[explorers], legal[explorers]
                )
            actions = sample_actions(probs, generator)  # [b]; finished rows ignore theirs
            games.step(actions, check=False)
            ended = (games.done & alive).nonzero().squeeze(1)
            if len(ended):
                outcome[walker[ended]] = self.utility(games, 0, ended)

        self._write_value_rows(value_rows, outcome, context)

    def _write_value_rows(
        self,
        value_rows: list[tuple[torch.Tensor, ...]],
        outcome: torch.Tensor,
        context: TraversalContext,
    ) -> None:
        """TD(lambda) returns of the on-policy states, computed backwards; rows to the value
        buffer with the mover's return as the target.

        ``G_t = (1 - lambda) V(s_{t+1}) + lambda G_{t+1}`` along each trajectory, with the
        round's outcome after its last state (lambda = 1: the outcome itself).
        """
        lam = self.td_lambda
        seen = torch.zeros(len(outcome), dtype=torch.bool, device=outcome.device)  # [W]
        later_return, later_value = outcome.clone(), torch.zeros_like(outcome)  # [W] each
        for rows, history, to_player0, value in reversed(value_rows):
            bootstrapped = (1 - lam) * later_value[rows] + lam * later_return[rows]
            target = torch.where(seen[rows], bootstrapped, outcome[rows])  # [n] for player 0
            later_return[rows], later_value[rows], seen[rows] = target, value, True
            returns = (to_player0 * target)[:, None]  # [n, 1] the mover's return
            context.add_value_rows(history, torch.ones_like(returns, dtype=torch.bool), returns)

    def _children(
        self,
        games: GameBatch,
        rows: torch.Tensor,
        legal: torch.Tensor,
        traverser: int,
        queue: InferenceQueue,
    ) -> Callable[[], torch.Tensor]:
        """Submit the value of every legal child of the games at ``rows`` [n] (``legal``
        [n, A], n > 0); returns a function giving them [n, A] for ``traverser`` once the
        queue has run (0 at illegal actions). Children where the round ends get their
        score."""
        n, A = legal.shape
        parent, action = legal.nonzero(as_tuple=True)  # [c] one per child
        children = games.select(rows[parent])
        children.step(action, check=False)
        ticket = queue.submit(VALUE_NETWORK, encode_history(children), _one(parent))
        # The network values the child for its player to move: the traverser's side is
        # the opposite where the opponent moves next.
        side = torch.where(children.current_player == traverser, 1.0, -1.0)  # [c]
        ended = children.done
        final = self.utility(children, traverser)  # [c] exact where the round ended

        def values() -> torch.Tensor:
            value = torch.where(ended, final, side * ticket.result()[:, 0].float())
            q = torch.zeros(n, A, device=legal.device)
            q[parent, action] = value
            return q

        return values


def _one(rows: torch.Tensor) -> torch.Tensor:
    """The value network's legal mask: its single output, for every row [n, 1]."""
    return torch.ones(len(rows), 1, dtype=torch.bool, device=rows.device)
