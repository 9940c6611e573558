"""External-sampling traversal (Lanctot, Waugh, Zinkevich & Bowling, "Monte Carlo
Sampling for Regret Minimization in Extensive Games", NeurIPS 2009), the
sampler of Deep CFR (Brown, Lerer, Gross & Sandholm, 2019).

The traverser branches on every legal action at every one of its nodes; the
opponent's actions are sampled from its current strategy and chance (the deal)
is sampled once per traversal. Each traverser node then gets its exact
instantaneous regrets for the dealt game and the sampled opponent actions,
``r(a) = v(a) - sum_a' sigma(a') v(a')``, and each opponent node adds its
strategy to the strategy buffer.

The tree is walked breadth-first as tensors: a level is one ``GameBatch`` with
a row per node of every concurrent traversal. Traverser rows fork into one
child per legal action (``select`` with repeated indices), opponent rows into
one sampled child, and the children are the next level. Once every leaf is
reached, values flow back up level by level (a stack of levels): a node's value
is the ``sigma``-weighted sum of its children's (``index_add_`` over parent
ids), and its regret row is read off the same children.

The number of nodes is exponential in the traverser's decisions, so this is a
sampler for tiny rules (``Rules.tiny()``), where it is exact; ``max_frontier``
stops it with an error before a larger game exhausts memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lostcities_cfr.arguments import PositiveFloat, PositiveInt, checked
from lostcities_cfr.cfr.traversal import (
    Sampler,
    TraversalContext,
    current_strategies,
    sample_actions,
)
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.protocol import BatchedGames


@dataclass
class _Level:
    """One depth of the walked trees, kept until the values come back up.

    Rows are those of the level's ``GameBatch``: finished games (leaves) and nodes.
    """

    leaf_value: torch.Tensor  # [n] float32: utility at finished rows, 0 at nodes
    child_parent: torch.Tensor | None = None  # [k] int64: the row each child leaves from
    child_weight: torch.Tensor | None = None  # [k]: sigma(a) below traverser nodes, 1 below others
    mine: torch.Tensor | None = None  # [t] int64: the traverser's nodes
    features: torch.Tensor | None = None  # [t, F] of those nodes
    legal: torch.Tensor | None = None  # [t, A] bool
    # Forks, the first f children: the traverser node each leaves from and its action.
    fork_row: torch.Tensor | None = None  # [f] int64 (index into mine)
    fork_action: torch.Tensor | None = None  # [f] int64


class ExternalSampling(Sampler):
    """External sampling with tensor forking (exact on tiny rules).

    Args:
        walkers: traversals run concurrently (deals per batch).
        utility_scale: utilities (score differences) are divided by it.
        max_frontier: the most rows one level of the walked trees may hold;
            a larger level raises :class:`~lostcities_cfr.errors.ConfigError`.
    """

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 1.0,
        max_frontier: PositiveInt = 1 << 22,
    ) -> None:
        super().__init__(walkers, utility_scale)
        self.max_frontier = max_frontier

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        traverser = context.traverser
        levels: list[_Level] = []
        frontier = games
        while True:
            finished = frontier.done  # [n]
            level = _Level(leaf_value=torch.where(finished, self.utility(frontier, traverser), 0.0))
            levels.append(level)
            live = (~finished).nonzero().squeeze(1)  # [m] the nodes
            if len(live) == 0:
                break
            if len(live) > self.max_frontier:
                raise ConfigError(
                    f"ExternalSampling: a level of the traversal trees holds {len(live)} "
                    f"nodes, more than max_frontier={self.max_frontier}; external sampling is "
                    "exponential in the game's length: use it on tiny rules (or fewer walkers), "
                    "and BudgetedSampling for full-size games"
                )
            legal = frontier.legal_mask()  # [n, A]
            features = frontier.encode()  # [n, F]
            sigma = current_strategies(context.queue, frontier, features, legal, live)  # [n, A]
            context.stats.nodes += len(live)

            is_mine = frontier.current_player[live] == traverser
            mine, theirs = live[is_mine], live[~is_mine]  # [t], [o]
            their_sigma = sigma[theirs]
            their_actions = sample_actions(their_sigma, context.generator)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], their_sigma)
            my_legal = legal[mine]  # [t, A]
            fork_row, fork_action = my_legal.nonzero(as_tuple=True)  # [f] each
            level.mine, level.features, level.legal = mine, features[mine], my_legal
            level.fork_row, level.fork_action = fork_row, fork_action
            level.child_parent = torch.cat([mine[fork_row], theirs])
            level.child_weight = torch.cat(
                [sigma[mine[fork_row], fork_action], torch.ones(len(theirs), device=sigma.device)]
            )
            frontier = frontier.select(level.child_parent)
            frontier.step(torch.cat([fork_action, their_actions]), check=False)

        child_value = None  # [k] value of every row of the level below
        for level in reversed(levels):
            value = level.leaf_value  # a node's value: the weighted sum of its children's
            if child_value is not None:
                value = value.index_add(0, level.child_parent, level.child_weight * child_value)
                if len(level.mine):
                    action_value = torch.zeros(level.legal.shape, device=value.device)  # [t, A]
                    action_value[level.fork_row, level.fork_action] = child_value[
                        : len(level.fork_row)
                    ]
                    regrets = (action_value - value[level.mine, None]) * level.legal
                    context.add_advantage_rows(level.features, level.legal, regrets)
            child_value = value
