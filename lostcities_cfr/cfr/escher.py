"""ESCHER: regrets read off a learned history value function, with no importance weights.

McAleer, Farina, Lanctot & Sandholm, "ESCHER: Eschewing Importance Sampling in Games by
Computing a History Value Function to Estimate Regret" (ICLR 2023).

Each traversal is one trajectory. The opponent plays its current strategy ``sigma``; the
traverser plays a fixed *sampling policy* ``mu`` with full support (a mixture of uniform
play, a guide agent such as ``heuristic:balanced``, and ``sigma`` itself). The history
value network ``V(s)`` sees the whole state (both hands, and the deck's contents but not
its order: ``BatchedGames.encode_history``) and estimates the return
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

from dataclasses import dataclass
from typing import NamedTuple

import torch

from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    LeftOpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.cfr.traversal import (
    COMPACT_BELOW,
    TraversalContext,
    current_strategies,
    sample_actions,
    static_rows,
)
from lostcities_cfr.cfr.value_baseline import VALUE_NETWORK, ValueBaselineSampler, value_mask
from lostcities_cfr.game.fused import compiled_on, run_compiled
from lostcities_cfr.game.protocol import BatchedGames


class ESCHERSampling(ValueBaselineSampler):
    """ESCHER's trajectory sampling with a learned history value baseline (module docstring).

    Args:
        walkers, utility_scale, exploration, guide, guide_weight, max_decisions: as
            :class:`~lostcities_cfr.cfr.value_baseline.ValueBaselineSampler`.
        switch_range: each trajectory turns on-policy at a decision drawn uniformly from
            ``[0, switch_range)`` (module docstring): larger values write more advantage
            rows and fewer value rows per trajectory.
        td_lambda: the value targets' TD(lambda): 1 takes the round's outcome, smaller
            values lean on the value network's own estimates of the later states (less
            noise from the cards still to come, more bias while the network is wrong).
    """

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 100.0,
        exploration: LeftOpenUnitInterval = 0.2,
        guide: str | None = "heuristic:balanced",
        guide_weight: ClosedUnitInterval = 0.4,
        switch_range: PositiveInt = 120,
        td_lambda: ClosedUnitInterval = 1.0,
        max_decisions: PositiveInt | None = 300,
    ) -> None:
        super().__init__(walkers, utility_scale, exploration, guide, guide_weight, max_decisions)
        self.switch_range = switch_range
        self.td_lambda = td_lambda

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        B, device = games.batch_size, games.device
        traverser, queue, generator = context.traverser, context.queue, context.generator
        games, compiled = games.clone(), games.compiled
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        # The decision at which each trajectory turns on-policy (counted from its start).
        switch = games.turn + torch.randint(
            self.switch_range, (B,), generator=generator, device=device
        )  # [b]
        # On-policy states wait here for their trajectory's outcome: (walker, history
        # features, +1/-1 for the player to move being player 0 / 1, V(s) for player 0).
        value_rows: list[tuple[torch.Tensor, ...]] = []
        outcome = torch.zeros(B, device=device)  # [B] player 0's final return, or V at a cut
        alive = ~games.done  # [b] the trajectories still walking
        ended = torch.zeros_like(alive)  # [b] those the last step ended, not yet scored

        while True:
            # Every mask of the step, then all their sizes in one read: the step's only wait
            # for the device. Sizes known, rows are taken with fixed shapes (static_rows).
            step = _Step.of(self, games, alive, switch, traverser)
            n = _Counts(*context.read_counts(step.counts(ended)))
            if n.ended:
                rows = static_rows(ended, n.ended, compiled)
                outcome[walker[rows]] = self.utility(games, 0, rows)
            if n.alive == 0:
                break
            if n.alive <= COMPACT_BELOW * games.batch_size:
                # Finished games ignore their actions but still cost a row: drop them.
                live = static_rows(alive, n.alive, compiled)
                games, walker, switch = games.select(live), walker[live], switch[live]
                alive = torch.ones(n.alive, dtype=torch.bool, device=device)
                step = _Step.of(self, games, alive, switch, traverser)
            live = static_rows(alive, n.alive, compiled)  # [a]
            context.stats.steps += 1
            legal, features = step.legal, games.encode()  # [b, A], [b, F]
            # The on-policy states (value rows) and the cut ones; V is asked, in the same
            # flush as the strategies, where a target uses it: at a cut (the trajectory's
            # return) and, with td_lambda < 1, at every state (its bootstrap). With
            # td_lambda = 1 the on-policy states' own values would go unread.
            if n.valued:
                valued = static_rows(step.valued, n.valued, compiled)  # [v]
                history = games.encode_history()[valued]  # [v, H] (games' encoding is kept)
                priced = static_rows(step.priced[valued], n.priced, compiled)  # [p] into valued
                if n.priced:
                    asked = valued[priced]
                    value_ticket = queue.submit(VALUE_NETWORK, history[priced], value_mask(asked))
            if n.sampled:
                sampled = static_rows(step.sampled, n.sampled, compiled)  # advantage rows [s]
                children = self.submit_children_values(
                    queue, games, sampled, legal[sampled], traverser, n.children
                )
            sigma = current_strategies(
                queue, games, features, legal, live, (n.alive_p0, n.alive - n.alive_p0)
            )  # [b, A]
            context.stats.nodes += n.alive

            if n.valued:
                value = torch.zeros(n.valued, device=device)  # [v] V for player 0
                if n.priced:
                    value[priced] = step.to_player0[asked] * value_ticket.result()[:, 0].float()
                cut_rows = static_rows(step.cut[valued], n.cut, compiled)  # into valued
                outcome[walker[valued[cut_rows]]] = value[cut_rows]
                kept = static_rows(~step.cut[valued], n.valued - n.cut, compiled)  # into valued
                value_rows.append(
                    (
                        walker[valued[kept]],
                        history[kept].half(),
                        step.to_player0[valued[kept]],
                        value[kept],
                    )
                )
            if n.cut:
                context.stats.truncated += n.cut
                games.done = games.done | step.cut
                alive = alive & ~step.cut
            if n.sampled:
                q = children()  # [s, A] the children's values for the traverser
                regrets = q - (sigma[sampled] * q).sum(1, keepdim=True)
                context.add_advantage_rows(
                    features[sampled], legal[sampled], regrets * legal[sampled]
                )
            if n.theirs:
                theirs = static_rows(step.theirs, n.theirs, compiled)
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            explorers = static_rows(step.explorers, n.explorers, compiled)
            probs = self.playing_policy(games, explorers, sigma, legal)  # [b, A]
            actions = sample_actions(probs, generator, compiled)  # [b]; finished rows ignore theirs
            games.step(actions, check=False)
            ended = games.done & alive  # scored at the next step's read
            alive = alive & ~games.done

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
        histories, targets = [], []
        for rows, history, to_player0, value in reversed(value_rows):
            bootstrapped = (1 - lam) * later_value[rows] + lam * later_return[rows]
            target = torch.where(seen[rows], bootstrapped, outcome[rows])  # [n] for player 0
            later_return[rows], later_value[rows], seen[rows] = target, value, True
            histories.append(history)
            targets.append(to_player0 * target)  # the mover's return
        if histories:  # one write of the whole walk's rows, in the order computed
            context.add_value_rows(torch.cat(histories), torch.cat(targets))


class _Counts(NamedTuple):
    """How many rows each mask of a step holds (:meth:`_Step.counts`), read at once."""

    alive: int
    alive_p0: int  # of them, player 0 to move
    valued: int
    priced: int
    cut: int
    sampled: int
    theirs: int
    explorers: int
    children: int  # legal actions at the sampled rows: the children valued
    ended: int  # rows the step before ended


@dataclass
class _Step:
    """The masks ([b] bool) of one step of :meth:`ESCHERSampling.walk` (see there).

    On compiled kernels (``GameBatch``'s ``kernels``) the masks and their counts are each
    one compiled call, where eager ones take about 90 operator calls a step.
    """

    legal: torch.Tensor  # [b, A]
    to_player0: torch.Tensor  # [b] float: +1 where player 0 moves, -1 where player 1 does
    alive: torch.Tensor
    alive_p0: torch.Tensor
    cut: torch.Tensor  # past max_decisions: cut here
    valued: torch.Tensor  # on-policy or cut: a value row, or V read as the return
    priced: torch.Tensor  # V asked: cut (td_lambda = 1) or every valued state
    sampled: torch.Tensor  # the traverser's before its switch: advantage rows
    theirs: torch.Tensor  # the opponent's: strategy rows
    explorers: torch.Tensor  # the traverser's up to its switch: sampling policy mu
    compiled: bool

    @classmethod
    def of(
        cls,
        sampler: ESCHERSampling,
        games: BatchedGames,
        alive: torch.Tensor,
        switch: torch.Tensor,
        traverser: int,
    ) -> _Step:
        args = (sampler, alive, switch, traverser)
        compiled = games.compiled
        masks = compiled_on(games, _step_masks, *args) if compiled else _step_masks(games, *args)
        return cls(games.legal_mask(), *masks, compiled)

    def counts(self, ended: torch.Tensor) -> torch.Tensor:
        """[10] int64 on the device: the fields of :class:`_Counts`."""
        masks = (self.legal, self.alive, self.alive_p0, self.valued, self.priced, self.cut)
        masks += (self.sampled, self.theirs, self.explorers, ended)
        return run_compiled(_mask_counts, *masks) if self.compiled else _mask_counts(*masks)


def _step_masks(
    games: BatchedGames,
    sampler: ESCHERSampling,
    alive: torch.Tensor,
    switch: torch.Tensor,
    traverser: int,
) -> tuple[torch.Tensor, ...]:
    """The fields of :class:`_Step` from ``to_player0`` to ``explorers``."""
    turn, mover = games.turn, games.current_player  # [b] each
    cut = sampler.cut(turn, alive)
    walking = alive & ~cut
    valued = alive & ((turn > switch) | cut)
    mine = walking & (mover == traverser)
    return (
        1.0 - 2.0 * mover.float(),
        alive,
        alive & (mover == 0),
        cut,
        valued,
        cut if sampler.td_lambda == 1 else valued,
        mine & (turn < switch),
        walking & (mover != traverser),
        mine & (turn <= switch),
    )


def _mask_counts(legal: torch.Tensor, *masks: torch.Tensor) -> torch.Tensor:
    """[10] int64: the rows of each of the nine masks (``alive`` ... ``ended``), with the
    legal actions of the ``sampled`` rows (the children) before ``ended``'s."""
    counts = torch.stack(masks).sum(1)  # [9]
    children = (legal & masks[5][:, None]).sum().view(1)
    return torch.cat([counts[:8], children, counts[8:]])
