"""A user's own sampler, network, callback and agent, written outside the package as
``docs/architecture.md`` ("Extending") shows them; the tests of this folder use them as a
notebook or a config would. Each class here is quoted verbatim by the docs
(``test_docs.py`` holds the two equal).
"""

from __future__ import annotations

import torch
from torch import nn

from lostcities_cfr.callbacks import TraversalCallback
from lostcities_cfr.cfr import Sampler, TraversalContext
from lostcities_cfr.cfr.traversal import current_strategies, sample_actions
from lostcities_cfr.game import GameBatch


class OnPolicySampling(Sampler):
    """One trajectory per traversal, both players on their current strategy; each
    traverser decision's row is the outcome times ``1[a = a*] - sigma(a)`` (a toy
    estimator: its mean is ``sigma(a) (v(a) - v)``)."""

    def walk(self, games: GameBatch, context: TraversalContext) -> None:
        games = games.clone()  # walk leaves the games it is given as they are
        decisions = []  # the traverser's: (rows, features, legal, sigma, actions)
        while not bool(games.done.all()):
            live = (~games.done).nonzero().squeeze(1)
            legal, features = games.legal_mask(), games.encode()  # [B, A], [B, F]
            sigma = current_strategies(context.queue, games, features, legal, live)
            context.stats.nodes += len(live)
            actions = sample_actions(sigma, context.generator)  # finished games ignore theirs
            mine = games.current_player[live] == context.traverser
            theirs = live[~mine]
            context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])
            rows = live[mine]
            decisions.append((rows, features[rows], legal[rows], sigma[rows], actions[rows]))
            games.step(actions, check=False)
        utility = self.utility(games, context.traverser)  # [B]
        for rows, features, legal, sigma, actions in decisions:
            chosen = nn.functional.one_hot(actions, legal.shape[1])  # [n, A]
            regrets = utility[rows, None] * (chosen - sigma) * legal
            context.add_advantage_rows(features, legal, regrets)


class TwoLayerNet(nn.Module):
    """Features [B, F] -> one output per action [B, A], through one hidden layer."""

    def __init__(self, n_features: int, n_actions: int, hidden: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(n_features, hidden), nn.Tanh(), nn.Linear(hidden, n_actions)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.body(features)


class NodeCounter(TraversalCallback):
    """Records the decision nodes of every traversal epoch and logs their running total."""

    def __init__(self) -> None:
        self.nodes: list[float] = []

    def on_traversal_end(self, trainer, pl_module) -> None:
        self.nodes.append(pl_module.iteration_metrics["traversal/nodes"])

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pl_module.log("traversal/total_nodes", sum(self.nodes))


class LowestActionAgent:
    """Plays the legal action of the lowest id in every game (card 0 first, then discards)."""

    name = "lowest-action"

    def act(self, batch: GameBatch) -> torch.Tensor:
        legal = batch.legal_mask()  # [B, A] bool
        return legal.int().argmax(1)  # the first True of each row
