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

With ``expand_opponent`` the opponent's nodes fork too, each child weighted by the
opponent's probability of its action: chance is then the only thing sampled (chance-sampled
CFR, Zinkevich, Johanson, Bowling & Piccione, "Regret Minimization in Games with Incomplete
Information", NeurIPS 2007). A traverser node's regrets are then scaled by the opponent's
probability of reaching it, ``pi_-i(h) * r(a)``: sampling the opponent made the rows of
external sampling arrive in proportion to that probability, and expanding it must weigh them
by it instead. Regret matching ignores a positive factor common to an information set, so
the advantage networks' weighted means still rank and mix the actions as counterfactual
regrets do, with none of the variance of the sampled opponent actions. The strategy rows are
still those of one sampled opponent path per deal, as external sampling writes them.

With ``aggregate`` the regret rows of a batch of traversals that share an information
set (equal features and legal actions) become one row, their sum divided by the number of
traversals in the batch: its expectation is the information set's counterfactual regret
under this iteration's strategies (each visit's probability times its expected regret), the
quantity linear CFR sums with weight ``t``. An information set then holds one row per batch
and iteration instead of one per visit: the networks fit its weighted mean from rows whose
noise is that of the batch's average, not of a single visit. Regret matching ignores the
per-information-set factor that counting rows rather than visits changes.

The number of nodes is exponential in the traverser's decisions (in every decision with
``expand_opponent``), so this is a sampler for small games (``Rules.tiny()``, Kuhn and Leduc
poker), where it is exact per deal; ``max_frontier`` stops it with an error before a larger
game exhausts memory.
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
    reach: torch.Tensor | None = None  # [t]: the opponent's probability of each of mine,
    # where the opponent forks (``expand_opponent``)


class ExternalSampling(Sampler):
    """External sampling with tensor forking (exact on tiny rules).

    Args:
        walkers: traversals run concurrently (deals per batch).
        utility_scale: utilities (score differences) are divided by it.
        max_frontier: the most rows one level of the walked trees may hold;
            a larger level raises :class:`~lostcities_cfr.errors.ConfigError`.
        expand_opponent: fork the opponent's nodes too, weighting its actions by its
            strategy instead of sampling one (chance-sampled CFR: the module docstring).
        aggregate: one regret row per information set and batch of traversals, the sum of
            its visits' regrets over the batch's traversals (the module docstring).
    """

    @checked
    def __init__(
        self,
        walkers: PositiveInt = 1024,
        utility_scale: PositiveFloat = 1.0,
        max_frontier: PositiveInt = 1 << 22,
        expand_opponent: bool = False,
        aggregate: bool = False,
    ) -> None:
        super().__init__(walkers, utility_scale)
        self.max_frontier = max_frontier
        self.expand_opponent = expand_opponent
        self.aggregate = aggregate

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        traverser = context.traverser
        levels: list[_Level] = []
        frontier = games
        reach = on_path = None  # tracked only where the opponent forks
        if self.expand_opponent:
            reach = torch.ones(games.batch_size, device=games.device)  # [n] the opponent's
            # [n] whether a row lies on the opponent's one sampled path
            on_path = torch.ones(games.batch_size, dtype=torch.bool, device=games.device)
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
            their_actions = sample_actions(their_sigma, context.generator)  # [o]
            # Strategy rows: the opponent's nodes on its sampled path (all of them unexpanded).
            path = theirs if on_path is None else theirs[on_path[theirs]]  # [p]
            if len(path):
                context.add_strategy_rows(features[path], legal[path], sigma[path])
            my_legal = legal[mine]  # [t, A]
            fork_row, fork_action = my_legal.nonzero(as_tuple=True)  # [f] each
            level.mine, level.features, level.legal = mine, features[mine], my_legal
            level.fork_row, level.fork_action = fork_row, fork_action
            if self.expand_opponent:
                their_row, actions = legal[theirs].nonzero(as_tuple=True)  # [g] each
                their_parent = theirs[their_row]
                their_weight = sigma[their_parent, actions]
            else:
                their_parent, actions = theirs, their_actions
                their_weight = torch.ones(len(theirs), device=sigma.device)
            level.child_parent = torch.cat([mine[fork_row], their_parent])
            level.child_weight = torch.cat([sigma[mine[fork_row], fork_action], their_weight])
            if reach is not None:
                # The opponent's reach: its own probability below its nodes.
                level.reach = reach[mine]
                reach = reach[level.child_parent] * torch.cat(
                    [torch.ones(len(fork_row), device=sigma.device), their_weight]
                )
                their_path = on_path[their_parent] & (actions == their_actions[their_row])
                on_path = torch.cat([on_path[mine[fork_row]], their_path])
            frontier = frontier.select(level.child_parent)
            frontier.step(torch.cat([fork_action, actions]), check=False)

        rows: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
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
                    if level.reach is not None:  # the opponent forks
                        regrets = regrets * level.reach[:, None]
                    rows.append((level.features, level.legal, regrets))
            child_value = value
        if self.aggregate and rows:
            features, legal, regrets = (torch.cat(part) for part in zip(*rows, strict=True))
            rows = [information_set_sums(features, legal, regrets, games.batch_size)]
        for features, legal, regrets in rows:
            context.add_advantage_rows(features, legal, regrets)


def information_set_sums(
    features: torch.Tensor,  # [n, F]
    legal: torch.Tensor,  # [n, A] bool
    regrets: torch.Tensor,  # [n, A]
    traversals: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One row per distinct (features, legal): features [u, F], legal [u, A] and the sum of
    its rows' regrets divided by ``traversals`` [u, A]."""
    keys = torch.cat([features, legal.to(features.dtype)], dim=1)  # [n, F + A]
    unique, inverse = torch.unique(keys, dim=0, return_inverse=True)  # [u, F + A], [n]
    sums = torch.zeros(len(unique), regrets.shape[1], dtype=regrets.dtype, device=regrets.device)
    sums.index_add_(0, inverse, regrets)
    F = features.shape[1]
    return unique[:, :F], unique[:, F:].bool(), sums / traversals
