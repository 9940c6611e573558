"""ESCHER: regrets read off a learned history value function, with no importance weights.

McAleer, Farina, Lanctot & Sandholm, "ESCHER: Eschewing Importance Sampling in Games by
Computing a History Value Function to Estimate Regret" (ICLR 2023).

Each traversal is one trajectory. The opponent plays its current strategy ``sigma``; the
traverser plays a fixed *sampling policy* ``mu`` with full support (a mixture of uniform
play, a guide agent such as ``heuristic:balanced``, and optionally ``sigma`` itself). At
every decision ``h`` the history value network ``Q(h, .)``, which sees the whole state
(both hands; the deck's contents but not its order: :func:`~lostcities_cfr.game.encoding.encode_history`),
gives the value of each action for the player to move when both players follow ``sigma``
afterwards. Every traverser decision on the trajectory then yields the advantage row

    r(a) = Q(h, a) - sum_b sigma(b) Q(h, b)        for every legal a,

and every opponent decision a strategy row, as in Deep CFR. No playout and no importance
weight enters a row: its noise is the value network's error, not the luck of a playout,
and every traverser node pays for itself (about two decision nodes per advantage row,
against ~1,500 for :class:`~lostcities_cfr.cfr.budgeted_sampling.BudgetedSampling`).

The value network learns from the same trajectories. Its target for the action taken at
``h_t`` is a Retrace(lambda) return (Munos, Stepleton, Harutyunyan & Bellemare, NeurIPS
2016), which evaluates ``sigma`` from data of the sampling policy without exploding weights:

    G_t = V(h_{t+1}) + c_{t+1} (G_{t+1} - Q(h_{t+1}, a_{t+1})),   V(h) = sum_b sigma(b) Q(h, b),
    c_t = lambda * min(1, sigma(a_t) / mu(a_t)),

with ``G_t`` the final score difference where the game ended after ``a_t``. At the
opponent's nodes ``mu = sigma`` and the trace runs at ``lambda``; where the traverser took
an action ``sigma`` seldom plays, the trace is cut and the return bootstraps from ``Q``.
``docs/algorithms.md`` states the estimator and its biases.

Rounds that drag on (players trading discard piles) are cut after ``max_decisions``
decisions without a penalty: the cut trajectory's last return is ``V`` of the state where it
stopped, and the cut share is reported (``TraversalStats.truncated``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lostcities_cfr.agents import agent_from_spec
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
        guide_weight: its weight.
        trace_decay: Retrace's lambda in [0, 1]: 0 bootstraps every value target from the
            next state, 1 follows the trajectory as far as the sampling policy agrees
            with ``sigma``.
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
        trace_decay: float = 0.9,
        max_decisions: int | None = 300,
    ) -> None:
        super().__init__(walkers, utility_scale)
        if not 0 < exploration <= 1:
            raise ConfigError(f"ESCHERSampling exploration={exploration}; it must lie in (0, 1]")
        if not 0 <= guide_weight <= 1 - exploration:
            raise ConfigError(
                f"ESCHERSampling guide_weight={guide_weight}; it must lie in [0, 1 - exploration]"
            )
        if not 0 <= trace_decay <= 1:
            raise ConfigError(f"ESCHERSampling trace_decay={trace_decay}; it must lie in [0, 1]")
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
        self.trace_decay = trace_decay
        self.max_decisions = max_decisions

    def sampling_policy(
        self, games: GameBatch, rows: torch.Tensor, sigma: torch.Tensor, legal: torch.Tensor
    ) -> torch.Tensor:
        """The traverser's sampling policy ``mu`` [n, A] at the games ``rows`` [n] of ``games``,
        given their ``sigma`` and ``legal`` ([n, A])."""
        uniform = legal / legal.sum(1, keepdim=True).clamp(min=1)
        mu = self.exploration * uniform + (1 - self.exploration - self.guide_weight) * sigma
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
        traverser, queue = context.traverser, context.queue
        games = games.clone()
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        steps: list[_Step] = []
        outcome = torch.zeros(B, device=device)  # [B] player 0's final return, or V at a cut

        while (next_rows := live_rows(games, [walker])) is not None:
            games, (walker,), alive, live = next_rows
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            history = encode_history(games)  # [b, H]
            value_ticket = queue.submit(VALUE_NETWORK, history[live], legal[live])
            sigma = current_strategies(queue, games, features, legal, live)  # [b, A]
            q = torch.zeros(legal.shape, device=device)  # [b, A] Q(h, .) for the mover
            q[live] = value_ticket.result().float() * legal[live]
            v = (sigma * q).sum(1)  # [b] V(h) for the mover
            context.stats.nodes += len(live)
            mover = games.current_player  # [b]
            to_player0 = 1.0 - 2.0 * mover.float()  # [b] +1 where player 0 moves

            if self.max_decisions is not None:
                cut = alive & (games.turn >= self.max_decisions)
                if cut.any():
                    outcome[walker[cut]] = (to_player0 * v)[cut]
                    context.stats.truncated += int(cut.sum())
                    games.done = games.done | cut
                    alive = alive & ~cut
            mine = (alive & (mover == traverser)).nonzero().squeeze(1)
            theirs = (alive & (mover != traverser)).nonzero().squeeze(1)
            if len(mine):
                regrets = (q[mine] - v[mine, None]) * legal[mine]
                context.add_advantage_rows(features[mine], legal[mine], regrets)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            mu = sigma.clone()  # [b, A] the opponent samples sigma
            if len(mine):
                mu[mine] = self.sampling_policy(games, mine, sigma[mine], legal[mine])
            actions = sample_actions(mu, context.generator)  # [b]; finished rows ignore theirs
            rows = alive.nonzero().squeeze(1)
            taken = actions[rows, None]
            ratio = (sigma[rows].gather(1, taken) / mu[rows].gather(1, taken)).squeeze(1)
            steps.append(
                _Step(
                    walker=walker[rows],
                    history=history[rows].half(),
                    action=actions[rows],
                    q=(to_player0 * q.gather(1, actions[:, None]).squeeze(1))[rows],
                    v=(to_player0 * v)[rows],
                    trace=self.trace_decay * ratio.clamp(max=1.0),
                    to_player0=to_player0[rows],
                )
            )
            games.step(actions, check=False)
            ended = (games.done & alive).nonzero().squeeze(1)
            if len(ended):
                outcome[walker[ended]] = self.utility(games, 0, ended)

        self._write_value_rows(steps, outcome, context)

    @staticmethod
    def _write_value_rows(
        steps: list[_Step], outcome: torch.Tensor, context: TraversalContext
    ) -> None:
        """Retrace returns of every recorded decision, computed backwards; rows to the value
        buffer, each with its target at the action taken (the mover's return)."""
        # Per walker, its later decision's G, Q, V and c, filled in as the steps go back.
        # A walker's last decision is followed by the end of its round (or its cut): G =
        # its outcome.
        seen = torch.zeros(len(outcome), dtype=torch.bool, device=outcome.device)  # [W]
        later_return, later_q, later_v, later_trace = (torch.zeros_like(outcome) for _ in range(4))
        A = context.rules.n_actions
        for step in reversed(steps):
            w = step.walker
            bootstrapped = later_v[w] + later_trace[w] * (later_return[w] - later_q[w])
            target = torch.where(seen[w], bootstrapped, outcome[w])  # [n] G_t for player 0
            later_return[w], later_q[w], later_v[w], later_trace[w] = (
                target,
                step.q,
                step.v,
                step.trace,
            )
            seen[w] = True
            legal = torch.nn.functional.one_hot(step.action, A).bool()  # [n, A] the action only
            context.add_value_rows(step.history, legal, legal * (step.to_player0 * target)[:, None])


@dataclass
class _Step:
    """One lockstep decision of the live trajectories, kept for the value targets."""

    walker: torch.Tensor  # [n] int64: each row's trajectory
    history: torch.Tensor  # [n, H] float16: history features
    action: torch.Tensor  # [n] int64: the action taken
    q: torch.Tensor  # [n]: Q(h, a) for player 0
    v: torch.Tensor  # [n]: V(h) = sum_b sigma(b) Q(h, b) for player 0
    trace: torch.Tensor  # [n]: Retrace's c = lambda min(1, sigma(a) / mu(a))
    to_player0: torch.Tensor  # [n]: +1 where player 0 moved, -1 where player 1 did
