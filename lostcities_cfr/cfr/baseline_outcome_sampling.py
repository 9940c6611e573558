"""Outcome sampling with a learned baseline: regrets corrected by the returns actually seen.

VR-MCCFR (Schmid, Burch, Lanctot, Moravcik, Kadlec & Bowling, "Variance Reduction in
Monte Carlo Counterfactual Regret Minimization (VR-MCCFR) for Extensive Form Games using
Baselines", AAAI 2019), with a learned baseline as in DREAM (Steinberger, Lerer & Brown,
"DREAM: Deep Regret minimization with Advantage baselines and Model-free learning", 2020).

Each traversal is one trajectory: the opponent plays ``sigma``, the traverser the sampling
policy ``mu`` (:class:`~lostcities_cfr.cfr.value_baseline.ValueBaselineSampler`). At every
traverser decision ``h`` every child is valued by the history value network, ``b(a) =
V(h.a)`` (for the traverser; the score where the round ends), as in
:class:`~lostcities_cfr.cfr.escher.ESCHERSampling`. Unlike ESCHER, the trajectory's
return then corrects the baseline of the action taken, ``a*``. Backwards from the end of
the round, with ``v~`` the corrected value of the state after ``h``:

    q~(a) = b(a) + 1[a = a*] (v~ - b(a*)) / mu(a*)
    r(a) = q~(a) - sum_b sigma(b) q~(b)                       (the advantage row)
    v~(h) = sum_a sigma(a) b(a) + w (v~ - b(a*)),   w = min(clip, sigma(a*) / mu(a*)),

and at an opponent decision (which samples ``sigma`` itself) ``v~`` passes through
unchanged. With ``clip`` at infinity every row is an unbiased estimate of ``v(h, a) -
v(h)`` whatever the baseline's errors (they only change the variance); a finite ``clip``
(Retrace's truncation, Munos et al. 2016) bounds the products of ratios along a long
round at the cost of some bias. The value network learns ``v~`` of every visited state
(for the player to move there). ``docs/algorithms.md`` compares the two estimators.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    LeftOpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.cfr.traversal import (
    TraversalContext,
    current_strategies,
    live_rows,
    sample_actions,
)
from lostcities_cfr.cfr.value_baseline import ValueBaselineSampler, submit_state_values
from lostcities_cfr.game.protocol import BatchedGames


class BaselineOutcomeSampling(ValueBaselineSampler):
    """Outcome sampling whose regrets are baseline-corrected returns (module docstring).

    Args:
        walkers, utility_scale, exploration, guide, guide_weight, max_decisions: as
            :class:`~lostcities_cfr.cfr.value_baseline.ValueBaselineSampler`.
        clip: the largest ratio ``sigma(a*) / mu(a*)`` a corrected value carries back up
            the trajectory; ``None`` for no limit (unbiased, more variance).
    """

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 100.0,
        exploration: LeftOpenUnitInterval = 0.2,
        guide: str | None = None,
        guide_weight: ClosedUnitInterval = 0.0,
        max_decisions: PositiveInt | None = 300,
        clip: PositiveFloat | None = 1.0,
    ) -> None:
        super().__init__(walkers, utility_scale, exploration, guide, guide_weight, max_decisions)
        self.clip = clip

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        B, device = games.batch_size, games.device
        traverser, queue, generator = context.traverser, context.queue, context.generator
        games = games.clone()
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        decisions: list[_Decisions] = []
        outcome = torch.zeros(B, device=device)  # [B] the traverser's return, or V at a cut

        while (next_rows := live_rows(games, [walker])) is not None:
            games, (walker,), alive, live = next_rows
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            mover = games.current_player  # [b]
            cut = self.cut(games.turn, alive)
            cut_rows = cut.nonzero().squeeze(1)
            if len(cut_rows):
                cut_ticket = submit_state_values(queue, games, cut_rows)
            alive = alive & ~cut
            mine = (alive & (mover == traverser)).nonzero().squeeze(1)
            if len(mine):
                children = self.submit_children_values(queue, games, mine, legal[mine], traverser)
            sigma = current_strategies(queue, games, features, legal, live)  # [b, A]
            context.stats.nodes += len(live)
            if len(cut_rows):
                side = torch.where(mover[cut_rows] == traverser, 1.0, -1.0)
                outcome[walker[cut_rows]] = side * cut_ticket.result()[:, 0].float()
                context.stats.truncated += len(cut_rows)
                games.done = games.done | cut
            theirs = (alive & (mover != traverser)).nonzero().squeeze(1)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            probs = self.playing_policy(games, mine, sigma, legal)  # [b, A]
            actions = sample_actions(probs, generator)  # [b]; finished rows ignore theirs
            rows = alive.nonzero().squeeze(1)
            is_mine = mover[rows] == traverser
            step = _Decisions(
                walker=walker[rows],
                history=games.select(rows).encode_history().half(),
                side=torch.where(is_mine, 1.0, -1.0),  # the mover's return per traverser's
                mine=is_mine.nonzero().squeeze(1),
            )
            if len(mine):
                taken = actions[mine]
                step.features = features[mine].half()
                step.legal, step.sigma, step.baseline = legal[mine], sigma[mine], children()
                step.action = taken
                step.mu_taken = probs[mine].gather(1, taken[:, None]).squeeze(1)
            decisions.append(step)
            games.step(actions, check=False)
            ended = (games.done & alive).nonzero().squeeze(1)
            if len(ended):
                outcome[walker[ended]] = self.utility(games, traverser, ended)

        self._write_rows(decisions, outcome, context)

    def _write_rows(
        self, decisions: list[_Decisions], outcome: torch.Tensor, context: TraversalContext
    ) -> None:
        """Corrected values backwards along every trajectory: advantage rows at the
        traverser's decisions, value rows at every state (module docstring)."""
        value = outcome.clone()  # [W] v~ of the state after the step being processed
        clip = float("inf") if self.clip is None else self.clip
        for step in reversed(decisions):
            if len(step.mine):
                w = step.walker[step.mine]
                baseline, sigma = step.baseline, step.sigma  # [n, A] each
                taken = step.action[:, None]
                residual = value[w] - baseline.gather(1, taken).squeeze(1)  # [n]
                corrected = baseline.scatter_add(1, taken, (residual / step.mu_taken)[:, None])
                regrets = corrected - (sigma * corrected).sum(1, keepdim=True)
                context.add_advantage_rows(step.features, step.legal, regrets * step.legal)
                ratio = sigma.gather(1, taken).squeeze(1) / step.mu_taken
                value[w] = (sigma * baseline).sum(1) + ratio.clamp(max=clip) * residual
            context.add_value_rows(step.history, step.side * value[step.walker])  # the mover's


@dataclass
class _Decisions:
    """One lockstep step of the live trajectories, kept until the round's end."""

    walker: torch.Tensor  # [r] int64: each live row's trajectory
    history: torch.Tensor  # [r, H] float16: its history features
    side: torch.Tensor  # [r]: +1 where the traverser moves, -1 where the opponent does
    mine: torch.Tensor  # [n] int64: the rows (into the above) where the traverser moves
    # At the traverser's rows: features [n, F] float16, legal [n, A], sigma [n, A], the
    # children's values [n, A], the action taken [n] and its probability under mu [n].
    features: torch.Tensor | None = None
    legal: torch.Tensor | None = None
    sigma: torch.Tensor | None = None
    baseline: torch.Tensor | None = None
    action: torch.Tensor | None = None
    mu_taken: torch.Tensor | None = None
