"""A small game's whole tree as flat arrays, and a policy's best responses on it.

:class:`GameTree` holds every decision node of every deal with two partitions (the
policy's feature information sets and the responder's perfect-recall ones) and computes
best-response values by two numpy sweeps over the tree's levels
(``cfr/exploitability.py`` says why and states the metric). :func:`batched_game_tree`
builds one for any :class:`~lostcities_cfr.game.protocol.Game` that offers ``deals()``
(Kuhn and Leduc poker), with the batched engine: one ``step`` per level of every deal's
tree at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.protocol import Game

Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``policy(features [n, F] float32, legal [n, A] bool) -> probabilities [n, A]``."""

JointPolicy = Policy | Sequence[Policy]
"""One policy for both seats, or a pair ``(policy_0, policy_1)``, one per seat."""


@dataclass(frozen=True)
class GameTree:
    """Every decision node of a small game, chance included, as flat numpy arrays.

    Nodes are decision points (N of them); edges are (node, legal action) pairs (E) leading
    to a child node or to the end of the round. Two partitions of the nodes are kept:

    - feature information sets (I): nodes whose player sees the same feature vector; the
      policy is evaluated once per set (``features``, ``legal``).
    - perfect-recall information sets (J): nodes whose player has the same observation
      history; the best response chooses one action per set. Each refines a feature set.

    Attributes:
        game: the game (Lost Cities' ``Rules``, or a ``Game``), for messages.
        n_actions: A, its number of action ids.
        features: float32 [I, F], one feature vector per feature information set.
        legal: bool [I, A], its legal actions.
        infoset_player: int8 [I], the player to move in it.
        node_player: int8 [N].
        node_infoset: int64 [N], feature information set of each node.
        node_recall: int64 [N], perfect-recall information set of each node.
        root: int64 [D], the first decision node of each distinct deal.
        root_prob: float64 [D], that deal's probability (sums to 1).
        edge_parent: int64 [E], the node an edge leaves.
        edge_action: int64 [E], its action id.
        edge_child: int64 [E], the node it reaches, or -1 when the round ends.
        edge_return: float64 [E], player 0's return when the round ends there, else 0.
        levels: edge indexes grouped by their parent's turn, shallowest first.
    """

    game: object
    n_actions: int
    features: torch.Tensor
    legal: torch.Tensor
    infoset_player: np.ndarray
    node_player: np.ndarray
    node_infoset: np.ndarray
    node_recall: np.ndarray
    root: np.ndarray
    root_prob: np.ndarray
    edge_parent: np.ndarray
    edge_action: np.ndarray
    edge_child: np.ndarray
    edge_return: np.ndarray
    levels: tuple[np.ndarray, ...]

    @property
    def n_nodes(self) -> int:
        return len(self.node_player)

    @property
    def n_infosets(self) -> int:
        return len(self.infoset_player)

    @property
    def n_recall_infosets(self) -> int:
        return int(self.node_recall.max()) + 1

    # ---- policies ------------------------------------------------------------------------------
    def policy_probs(self, policy: JointPolicy) -> np.ndarray:
        """The policy on every feature information set, batched: float64 [I, A].

        Args:
            policy: one policy for both seats, called once on every distinct feature row
                (e.g. the average-strategy network), or a pair ``(policy_0, policy_1)``,
                each called once on its seat's rows (e.g. regret matching of each advantage
                network). Rows arrive on the CPU; a policy on another device moves them.

        Raises:
            ValueError: the output is not [n, A], not finite, negative, puts mass on illegal
                actions or does not sum to 1 over the legal ones.
        """
        legal = self.legal.numpy()
        if callable(policy):
            # Both seats' sets can show the same row; a single policy is asked each row once.
            first, inverse = self._distinct_rows
            probs = self._ask(policy, first)[inverse]
        elif len(policy) == 2:
            probs = np.zeros(legal.shape)
            for p in (0, 1):
                rows = np.flatnonzero(self.infoset_player == p)
                probs[rows] = self._ask(policy[p], rows)
        else:
            raise ValueError(
                f"policy must be a callable or a pair (policy_0, policy_1), got {len(policy)} items"
            )
        # float32 softmax outputs are off by ~1e-7; anything beyond 1e-4 is a wrong policy.
        bad = ~np.isfinite(probs).all(axis=1) | (probs < 0).any(axis=1)
        bad |= (np.where(legal, 0.0, probs) > 1e-4).any(axis=1)
        bad |= np.abs(probs.sum(axis=1) - 1) > 1e-4
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"the policy's probabilities are wrong on {int(bad.sum())} of {len(bad)} "
                f"information sets (first: {probs[row].tolist()} with legal actions "
                f"{np.flatnonzero(legal[row]).tolist()}); each row must be non-negative, "
                f"0 on illegal actions and sum to 1"
            )
        probs = np.where(legal, probs, 0.0)
        return probs / probs.sum(axis=1, keepdims=True)

    def _ask(self, policy: Policy, rows: np.ndarray) -> np.ndarray:
        """``policy`` on the feature information sets ``rows``: float64 [len(rows), A]."""
        index = torch.from_numpy(rows)
        with torch.no_grad():
            out = policy(self.features[index], self.legal[index])
        if tuple(out.shape) != (len(rows), self.n_actions):
            raise ValueError(
                f"the policy returned shape {tuple(out.shape)} for {len(rows)} rows; it must "
                f"return [n, A] = {(len(rows), self.n_actions)} for features [n, F]"
            )
        return out.detach().to("cpu", torch.float64).numpy()

    @functools.cached_property
    def _distinct_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(one set per distinct feature row [U], each set's row among those [I])."""
        _, first, inverse = np.unique(
            self.features.numpy(), axis=0, return_index=True, return_inverse=True
        )
        return first, inverse.reshape(-1)

    # ---- best response -------------------------------------------------------------------------
    def best_response_value(self, probs: np.ndarray, player: int) -> float:
        """Expected return of ``player``'s best response when the other plays ``probs``.

        Args:
            probs: float64 [I, A], a strategy on every feature information set (only the
                other player's rows are read).
            player: the responder, 0 or 1.
        """
        if player not in (0, 1):
            raise ValueError(f"player must be 0 or 1, got {player!r}")
        edge_prob = probs[self.node_infoset[self.edge_parent], self.edge_action]  # [E]
        responder_edge = self.node_player[self.edge_parent] == player  # [E]
        n_actions = self.n_actions

        # Top-down: chance-and-opponent reach of every node (the responder's own moves count 1).
        reach = np.zeros(self.n_nodes)
        reach[self.root] = self.root_prob
        step = np.where(responder_edge, 1.0, edge_prob)
        for edges in self.levels:
            inner = edges[self.edge_child[edges] >= 0]
            reach[self.edge_child[inner]] = reach[self.edge_parent[inner]] * step[inner]

        # Bottom-up: the responder's value at every node under its best response below.
        value = np.zeros(self.n_nodes)
        sign = 1.0 if player == 0 else -1.0
        for edges in reversed(self.levels):
            child, parent = self.edge_child[edges], self.edge_parent[edges]
            # child -1 (round over) reads a stale entry that np.where discards.
            q = np.where(child >= 0, value[child], sign * self.edge_return[edges])  # [e]
            mine = responder_edge[edges]
            # The other player's nodes: expectation under the policy.
            value += np.bincount(
                parent[~mine], weights=(edge_prob[edges] * q)[~mine], minlength=self.n_nodes
            )
            # The responder's sets: one action each, the largest reach-weighted value summed
            # over the set's histories.
            keys, slot = np.unique(
                self.node_recall[parent[mine]] * n_actions + self.edge_action[edges[mine]],
                return_inverse=True,
            )
            totals = np.bincount(slot, weights=reach[parent[mine]] * q[mine])  # [keys]
            sets = keys // n_actions
            order = np.lexsort((-totals, sets))  # by set, best action first
            best = order[np.diff(sets[order], prepend=-1) != 0]  # first of each set
            chosen = np.zeros(len(keys), dtype=bool)
            chosen[best] = True
            value += np.bincount(
                parent[mine], weights=np.where(chosen[slot], q[mine], 0.0), minlength=self.n_nodes
            )
        return float(self.root_prob @ value[self.root])

    def average_strategy(
        self, tables: Sequence[np.ndarray], weights: Sequence[float]
    ) -> np.ndarray:
        """The average of strategies ``tables`` (float64 [I, A] each) with iteration weights
        ``weights``, as CFR averages: at each set, each strategy weighs ``w_t`` times its own
        player's probability of reaching the set, ``sum_t w_t r_t(I) sigma_t(I) / sum_t w_t
        r_t(I)``. SD-CFR's policy (draw ``t`` with probability ``w_t`` at the start of a game,
        play ``sigma_t`` throughout) is distributed as this table plays.

        Needs feature sets with perfect recall (one own reach per set): a game walked from
        its ``deals()``; Lost Cities' feature sets are refused.
        """
        if not np.array_equal(self.node_recall, self.node_infoset):
            raise ConfigError(
                f"{self.game}: its feature sets lack perfect recall, so a reach-weighted "
                "average of strategies has no single table"
            )
        first = np.zeros(self.n_infosets, dtype=np.int64)
        first[self.node_infoset[::-1]] = np.arange(self.n_nodes)[::-1]  # a node of each set
        total = np.zeros_like(tables[0])
        mass = np.zeros(self.n_infosets)
        for probs, weight in zip(tables, weights, strict=True):
            reach = self._own_reach(probs)[first] * weight  # [I]
            total += reach[:, None] * probs
            mass += reach
        # A set that no strategy reaches plays the last one (it never matters for values).
        unreached = mass <= 0
        total[unreached], mass[unreached] = tables[-1][unreached], 1.0
        return total / mass[:, None]

    def _own_reach(self, probs: np.ndarray) -> np.ndarray:
        """[N] the probability that the player to move at each node played its own actions on
        the way there under ``probs`` (chance and the other player's moves count 1)."""
        edge_prob = probs[self.node_infoset[self.edge_parent], self.edge_action]  # [E]
        # reach[p] is player p's own reach of every node; each node reads its mover's.
        reach = np.zeros((2, self.n_nodes))
        reach[:, self.root] = 1.0
        mover = self.node_player[self.edge_parent]  # [E]
        for edges in self.levels:
            inner = edges[self.edge_child[edges] >= 0]
            for p in (0, 1):
                step = np.where(mover[inner] == p, edge_prob[inner], 1.0)
                reach[p, self.edge_child[inner]] = reach[p, self.edge_parent[inner]] * step
        return reach[self.node_player, np.arange(self.n_nodes)]

    def table_policy(self, probs: np.ndarray) -> Policy:
        """``probs`` (float64 [I, A], one row per feature set) as a policy that looks each
        feature row up: for a table computed on the tree (:meth:`average_strategy`)."""
        index = {row.tobytes(): i for i, row in enumerate(self.features.numpy())}
        table = torch.from_numpy(probs).float()

        def policy(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
            rows = [index[row.tobytes()] for row in features.detach().cpu().numpy()]
            return table[rows].to(features.device)

        return policy

    def nash_conv(self, probs: np.ndarray) -> float:
        """``BR_0(probs) + BR_1(probs)``: the gain of both best responses together."""
        return self.best_response_value(probs, 0) + self.best_response_value(probs, 1)

    def exploitability(self, probs: np.ndarray) -> float:
        """``nash_conv(probs) / 2``."""
        return self.nash_conv(probs) / 2

    def expected_return(self, probs: np.ndarray) -> float:
        """Player 0's expected return when both seats play ``probs`` (float64 [I, A]; a pair
        of policies gives each seat its own rows, :meth:`policy_probs`): the exact value of
        a match, such as a learned best response against the policy it answers."""
        edge_prob = probs[self.node_infoset[self.edge_parent], self.edge_action]  # [E]
        value = np.zeros(self.n_nodes)
        for edges in reversed(self.levels):
            child = self.edge_child[edges]
            q = np.where(child >= 0, value[child], self.edge_return[edges])  # [e]
            value += np.bincount(
                self.edge_parent[edges], weights=edge_prob[edges] * q, minlength=self.n_nodes
            )
        return float(self.root_prob @ value[self.root])


def too_big(game: object, max_nodes: int, what: str) -> ConfigError:
    """The error of a tree past ``max_nodes`` decision nodes."""
    return ConfigError(
        f"the game tree of {game} has more than max_nodes={max_nodes} decision nodes "
        f"({what}); exact exploitability needs a small game (kuhn_poker, leduc_poker, "
        "Lost Cities' tiny rules), or a larger max_nodes"
    )


@functools.lru_cache(maxsize=4)
def batched_game_tree(game: Game, max_nodes: int) -> GameTree:
    """Every deal and decision node of ``game`` (which offers ``deals()``), walked level by
    level with its batched engine; its features are its information sets (perfect recall,
    as ``Game.deals`` requires). Cached per ``(game, max_nodes)``.

    Raises:
        ConfigError: more than ``max_nodes`` decision nodes, or an information set whose
            histories lie at different depths (features without perfect recall).
    """
    frontier, deal_prob = game.deals()  # D games at their first decision, [D] float64
    players, features, legals, node_level = [], [], [], []
    edge_parent, edge_action, edge_child, edge_return, levels = [], [], [], [], []
    n_nodes = n_edges = 0
    depth = 0
    while True:
        live = (~frontier.done).nonzero().squeeze(1)  # [n]
        node = n_nodes + torch.arange(len(live))  # [n] node ids of the live rows
        if edge_child:  # the frontier's rows are the last level's edges, in order
            edge_child[-1][live.numpy()] = node.numpy()
        if len(live) == 0:
            break
        n_nodes += len(live)
        if n_nodes > max_nodes:
            raise too_big(game.name, max_nodes, f"found at depth {depth}")
        games = frontier.select(live)
        legal = games.legal_mask()  # [n, A]
        players.append(games.current_player.cpu())
        features.append(games.encode().cpu())
        legals.append(legal.cpu())
        node_level.append(torch.full((len(live),), depth))
        row, action = legal.nonzero(as_tuple=True)  # [e] each: one edge per legal action
        children = games.select(row)
        children.step(action, check=False)
        edge_parent.append(node[row.cpu()].numpy())
        edge_action.append(action.cpu().numpy())
        edge_child.append(np.full(len(row), -1, dtype=np.int64))
        ended = children.done.cpu()
        edge_return.append(torch.where(ended, children.returns()[:, 0].cpu(), 0.0).double())
        levels.append(np.arange(n_edges, n_edges + len(row)))
        n_edges += len(row)
        frontier, depth = children, depth + 1

    player = torch.cat(players)  # [N]
    keys = torch.cat([player[:, None].float(), torch.cat(features)], dim=1)  # [N, 1 + F]
    _, infoset = torch.unique(keys, dim=0, return_inverse=True)  # [N]
    infoset = infoset.numpy()
    level = torch.cat(node_level).numpy()
    first = np.full(infoset.max() + 1, -1)
    first[infoset[::-1]] = np.arange(len(infoset))[::-1]  # each set's first node
    if (level != level[first[infoset]]).any():
        raise ConfigError(
            f"{game.name}: an information set holds histories of different depths; "
            "its features lack perfect recall, which the exact walk needs"
        )
    return GameTree(
        game=game.name,
        n_actions=game.n_actions,
        features=torch.cat(features)[first],
        legal=torch.cat(legals)[first],
        infoset_player=player[first].numpy().astype(np.int8),
        node_player=player.numpy().astype(np.int8),
        node_infoset=infoset,
        node_recall=infoset,
        root=np.arange(len(deal_prob), dtype=np.int64),
        root_prob=deal_prob.cpu().numpy().astype(np.float64),
        edge_parent=np.concatenate(edge_parent),
        edge_action=np.concatenate(edge_action).astype(np.int64),
        edge_child=np.concatenate(edge_child),
        edge_return=torch.cat(edge_return).numpy(),
        levels=tuple(levels),
    )
