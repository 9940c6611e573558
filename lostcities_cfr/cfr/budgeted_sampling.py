"""A traversal of bounded cost for full-size games: a sampled trajectory that
branches at a few of the traverser's nodes and values each branch by one
playout.

External sampling (Lanctot et al., 2009; the sampler of Deep CFR, Brown et al.,
2019) branches on every traverser action at every traverser node, which is
exponential in the length of a Lost Cities round. This sampler keeps its
estimator where it branches and samples everything else:

1. Each traversal follows one trajectory. The opponent plays its current
   strategy ``sigma``; the traverser plays ``epsilon * uniform + (1 - epsilon)
   * sigma``. Opponent nodes on the trajectory add their strategy to the
   strategy buffer.
2. At each traverser node of the trajectory, with probability ``branch_prob``
   and at most ``max_branches`` times per traversal, the node branches: one
   child per legal action, each played out to the end of the round once, both
   players following ``sigma``. A child's playout return ``v^(a)`` is a
   one-sample, unbiased estimate of its value ``v(h, a)`` under ``sigma``.
3. Once every playout of a branch node has ended, the node's advantage row is
   ``r(a) = v^(a) - sum_a' sigma(a') v^(a')``, unbiased for ``v(h, a) - v(h)``,
   the quantity external sampling computes exactly.

A traversal thus visits at most ``L (1 + max_branches * b)`` nodes (``L`` the
length of a round, ``b`` the most legal actions at a node). Playouts are extra
rows of the same lockstep ``GameBatch`` as the trajectories, so a branch costs
no more network calls, only larger batches. The estimator and its biases are
discussed in ``docs/algorithms.md``.
"""

from __future__ import annotations

import torch

from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    LeftOpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.cfr.traversal import (
    Sampler,
    TraversalContext,
    current_strategies,
    explore,
    live_rows,
    sample_actions,
)
from lostcities_cfr.game import GameBatch, feature_size


class BudgetedSampling(Sampler):
    """Trajectory sampling with full branching at a few traverser nodes, valued by playouts.

    Args:
        walkers: trajectories run concurrently (deals per batch); with their
            playouts a batch holds up to ``walkers * (1 + max_branches * b)`` rows.
        utility_scale: utilities (score differences) are divided by it.
        exploration: epsilon, the weight of the uniform strategy in the
            traverser's play along the trajectory (playouts use ``sigma``); in [0, 1].
        branch_prob: probability that a traverser node of the trajectory branches.
        max_branches: the most branch nodes per traversal (the cost bound).
    """

    # Its record arrays are sized by Lost Cities' encoding and it grows its batch with
    # ``GameBatch.cat``: DeepCFR refuses it in another game.
    lost_cities_only = True

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 1.0,
        exploration: ClosedUnitInterval = 0.5,
        branch_prob: LeftOpenUnitInterval = 0.05,
        max_branches: PositiveInt = 4,
    ) -> None:
        super().__init__(walkers, utility_scale)
        self.exploration = exploration
        self.branch_prob = branch_prob
        self.max_branches = max_branches

    def walk(self, games: GameBatch, context: TraversalContext) -> None:
        B, device = games.batch_size, games.device
        rules, traverser, generator = games.rules, context.traverser, context.generator
        games = games.clone()
        # Per row: the branch record a playout evaluates (-1 on a trajectory), the
        # action it evaluates, and the branches a trajectory has left.
        record = torch.full((B,), -1, dtype=torch.int64, device=device)  # [b]
        slot = torch.zeros(B, dtype=torch.int64, device=device)  # [b]
        branches_left = torch.full((B,), self.max_branches, dtype=torch.int64, device=device)
        # Branch records, one per branch node, kept until all its playouts end.
        capacity = B * self.max_branches
        rec_features = torch.zeros(capacity, feature_size(rules), device=device)  # [R, F]
        rec_legal = torch.zeros(capacity, rules.n_actions, dtype=torch.bool, device=device)
        rec_sigma = torch.zeros(capacity, rules.n_actions, device=device)  # [R, A]
        rec_value = torch.zeros(capacity, rules.n_actions, device=device)  # [R, A] v^(a)
        rec_pending = torch.zeros(capacity, dtype=torch.int64, device=device)  # playouts running
        n_records = 0

        while (next_rows := live_rows(games, [record, slot, branches_left])) is not None:
            games, (record, slot, branches_left), alive, live = next_rows
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            sigma = current_strategies(context.queue, games, features, legal, live)  # [b, A]
            context.stats.nodes += len(live)

            on_path = alive & (record < 0)
            is_mine = games.current_player == traverser
            explores = on_path & is_mine  # [b] the traverser's trajectory nodes
            mine = explores.nonzero().squeeze(1)
            # Only the trajectories explore (most rows are playouts, which follow sigma).
            probs = sigma.index_put((mine,), explore(sigma[mine], legal[mine], self.exploration))
            actions = sample_actions(probs, generator)  # [b]; finished rows ignore theirs
            theirs = (on_path & ~is_mine).nonzero().squeeze(1)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            coin = torch.rand(games.batch_size, generator=generator, device=device)
            branch = (explores & (branches_left > 0) & (coin < self.branch_prob)).nonzero()
            branch = branch.squeeze(1)  # [n] rows that branch now
            if len(branch):
                ids = torch.arange(n_records, n_records + len(branch), device=device)
                n_records += len(branch)
                branch_legal = legal[branch]  # [n, A]
                rec_features[ids] = features[branch]
                rec_legal[ids] = branch_legal
                rec_sigma[ids] = sigma[branch]
                rec_pending[ids] = branch_legal.sum(1)
                branches_left[branch] -= 1
                fork_row, fork_action = branch_legal.nonzero(as_tuple=True)  # [f] one per child
                games = GameBatch.cat([games, games.select(branch[fork_row])])
                actions = torch.cat([actions, fork_action])
                record = torch.cat([record, ids[fork_row]])
                slot = torch.cat([slot, fork_action])
                branches_left = torch.cat([branches_left, torch.zeros_like(fork_action)])

            was_done = games.done
            games.step(actions, check=False)
            ended = (games.done & ~was_done & (record >= 0)).nonzero().squeeze(1)  # playouts
            if len(ended) == 0:
                continue
            ended_record = record[ended]
            rec_value[ended_record, slot[ended]] = self.utility(games, traverser, ended)
            rec_pending.index_add_(0, ended_record, torch.full_like(ended_record, -1))
            touched = ended_record.unique()
            complete = touched[rec_pending[touched] == 0]
            if len(complete):
                value, sigma_c = rec_value[complete], rec_sigma[complete]
                baseline = (sigma_c * value).sum(1, keepdim=True)  # [n, 1] sum sigma v^
                regrets = (value - baseline) * rec_legal[complete]
                context.add_advantage_rows(rec_features[complete], rec_legal[complete], regrets)
