"""Outcome-sampling traversal (Lanctot, Waugh, Zinkevich & Bowling, "Monte Carlo
Sampling for Regret Minimization in Extensive Games", NeurIPS 2009), with
epsilon-on-policy exploration at the traverser's nodes.

Each traversal is one trajectory: the opponent plays its current strategy
``sigma``, the traverser samples from ``q = epsilon * uniform + (1 - epsilon) *
sigma``. At a traverser node ``h`` with sampled action ``a*``, the sampled
value of action ``a`` is ``v~(a) = 1[a = a*] u W(h) / q(a*)``, where ``u`` is the
terminal utility and ``W(h)`` the product of ``sigma / q`` over the traverser's
sampled actions after ``h`` (the importance weight that turns the tail played
from ``q`` into a sample of ``sigma``). The node's row is the sampled regret

    r(a) = v~(a) - sum_a' sigma(a') v~(a') = u W(h) (1[a = a*] - sigma(a*)) / q(a*),

whose expectation given ``h`` is ``v(h, a) - v(h)``, the same as external
sampling's. With ``reach_weighted`` it is further divided by the traverser's
own sampling reach ``pi_q(h)``, which gives Lanctot et al.'s sampled
counterfactual regret (unbiased for the counterfactual regret itself).
``docs/algorithms.md`` discusses both and the variance.

The walkers move in lockstep and never fork; the weights ``W`` are suffix
products over the steps, computed once every trajectory has ended.
"""

from __future__ import annotations

import torch
from torch import nn

from lostcities_cfr.arguments import ClosedUnitInterval, PositiveFloat, PositiveInt, checked
from lostcities_cfr.cfr.traversal import (
    Sampler,
    TraversalContext,
    current_strategies,
    explore,
    live_rows,
    sample_actions,
)
from lostcities_cfr.game.protocol import BatchedGames

# Importance weights are capped at e^600 (~1e260): far beyond anything a float32 target
# holds, and low enough that multiplying by a utility never overflows float64 into inf
# or NaN. Weights that large come only from very long products on full-size rules.
MAX_LOG_WEIGHT = 600.0


class OutcomeSampling(Sampler):
    """Outcome sampling with epsilon exploration and importance-weighted regrets.

    Args:
        walkers: trajectories run concurrently (deals per batch).
        utility_scale: utilities (score differences) are divided by it.
        exploration: epsilon, the weight of the uniform strategy in the
            traverser's sampling strategy (0.6 in Lanctot et al.); in [0, 1]. Above 0
            every action is sampled sometimes, which the regrets' unbiasedness needs.
        reach_weighted: divide each row by the traverser's sampling reach
            (Lanctot et al.'s estimator); much larger targets.
        target_clip: targets are clipped to [-target_clip, target_clip]
            (biased where it binds; keeps float16 buffers finite); None keeps
            them as they are (then store them in a float32 buffer).
    """

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 1.0,
        exploration: ClosedUnitInterval = 0.6,
        reach_weighted: bool = False,
        target_clip: PositiveFloat | None = 1e4,
    ) -> None:
        super().__init__(walkers, utility_scale)
        self.exploration = exploration
        self.reach_weighted = reach_weighted
        self.target_clip = target_clip

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        B, device = games.batch_size, games.device
        traverser, generator = context.traverser, context.generator
        games = games.clone()
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        utility = self.utility(games, traverser).double()  # [B], final once a game ends
        ratios, sample_probs = [], []  # per step [B]: sigma(a*)/q(a*), q(a*); 1 off the traverser
        records = []  # per step: the traverser's nodes
        step = 0
        while (next_rows := live_rows(games, [walker])) is not None:
            games, (walker,), alive, live = next_rows
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            sigma = current_strategies(context.queue, games, features, legal, live)  # [b, A]
            context.stats.nodes += len(live)

            is_mine = games.current_player == traverser  # [b]
            probs = torch.where(is_mine[:, None], explore(sigma, legal, self.exploration), sigma)
            actions = sample_actions(probs, generator)  # [b]; finished rows ignore theirs
            mine = (alive & is_mine).nonzero().squeeze(1)
            theirs = (alive & ~is_mine).nonzero().squeeze(1)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])
            my_actions = actions[mine]
            my_sigma = sigma[mine, my_actions]  # [t] sigma(a*)
            my_q = probs[mine, my_actions]  # [t] q(a*) > 0
            # float16 features: what the buffer stores anyway, at half the memory until the end
            records.append(
                (step, walker[mine], features[mine].half(), legal[mine], my_actions, my_sigma, my_q)
            )
            ratios.append(torch.ones(B, device=device).index_copy(0, walker[mine], my_sigma / my_q))
            sample_probs.append(torch.ones(B, device=device).index_copy(0, walker[mine], my_q))

            games.step(actions, check=False)
            ended = (games.done & alive).nonzero().squeeze(1)
            if len(ended):
                utility[walker[ended]] = self.utility(games, traverser, ended).double()
            step += 1

        # Log-weights per step and trajectory ([S, B], float64): log W after the step
        # (-inf once a sampled action had sigma = 0) and the log sampling reach before it.
        log_ratio = torch.stack(ratios).double().log()
        zeros = torch.zeros(1, B, dtype=torch.float64, device=device)
        log_after = torch.cat([log_ratio.flip(0).cumsum(0).flip(0)[1:], zeros])
        log_reach = torch.cat([zeros, torch.stack(sample_probs).double().log().cumsum(0)[:-1]])
        for step, rows, features, legal, actions, my_sigma, my_q in records:
            if len(rows) == 0:
                continue
            log_weight = log_after[step, rows] - my_q.double().log()  # [t] log(W / q(a*))
            if self.reach_weighted:
                log_weight = log_weight - log_reach[step, rows]
            weight = utility[rows] * log_weight.clamp(max=MAX_LOG_WEIGHT).exp()
            chosen = nn.functional.one_hot(actions, legal.shape[1])  # [t, A]
            regrets = weight[:, None] * (chosen - my_sigma[:, None].double()) * legal
            if self.target_clip is not None:
                regrets = regrets.clamp(-self.target_clip, self.target_clip)
            context.add_advantage_rows(features, legal, regrets.float())
