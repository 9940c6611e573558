"""Agents over a Deep CFR model's networks (arena interface: ``act(batch) -> [B]``).

Deep CFR's output is the *average* strategy, learnt by the strategy network; the *current*
strategy (regret matching on a player's advantage network) is what the last iteration
played. The feature vector does not say which seat the viewer holds, and each seat has its
own advantage network, so the current strategy is a pair of network agents with the rows
of every batch routed by the player to move.

*SD-CFR* (Steinberger, "Single Deep Counterfactual Regret Minimization", 2019) plays the
average strategy without a strategy network: it keeps every iteration's advantage networks
and, at the start of a round, draws one iteration ``t`` with probability proportional to
its linear-CFR weight ``t ** exponent``, then plays that iteration's current strategy for
the whole round. A round played so is distributed exactly as under the average strategy.
The arena's batches are stateless, so the draw is a fixed function of the deal (a hash of
the shuffled deck): the same deal always draws the same iteration, in both seats.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
from torch import nn

from lostcities_cfr.agents import Agent, NetworkAgent, explain_actions
from lostcities_cfr.cfr.game_tree import JointPolicy, Policy
from lostcities_cfr.cfr.networks import masked_softmax
from lostcities_cfr.cfr.regret_matching import regret_matching
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch

POLICIES = ("average", "current", "sdcfr")


class SeatAgent:
    """Plays ``agents[p]`` in the games where player ``p`` is to move.

    Args:
        agents: one agent per seat.
        name: label in results.
    """

    def __init__(self, agents: Sequence[Agent], name: str = "seats") -> None:
        self.agents = list(agents)
        self.name = name

    def act(self, batch: GameBatch) -> torch.Tensor:
        player = batch.current_player  # [B]
        actions = torch.zeros(batch.batch_size, dtype=torch.int64, device=batch.device)
        for seat, agent in enumerate(self.agents):
            rows = (player == seat).nonzero().squeeze(1)
            if len(rows) == batch.batch_size:  # the arena's lockstep games: no copy
                return agent.act(batch)
            if len(rows):
                actions[rows] = agent.act(batch.select(rows))
        return actions

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """Each seat's agent's reasoning in the games where it is to move ([B, A] each)."""
        return explain_by_group(batch, batch.current_player, self.agents)


def current_agent(
    advantage_nets: Sequence[nn.Module],
    greedy: bool = False,
    seed: int | None = None,
    name: str = "current",
) -> SeatAgent:
    """Regret matching on each seat's own advantage network."""
    seats = [
        NetworkAgent(
            net,
            regret_matching,
            greedy=greedy,
            seed=None if seed is None else seed + p,  # the seats draw different numbers
            name=f"{name}_p{p}",
            outputs_label="advantage",
        )
        for p, net in enumerate(advantage_nets)
    ]
    return SeatAgent(seats, name=name)


def explain_by_group(
    batch: GameBatch, group: torch.Tensor, agents: Sequence[Agent]
) -> dict[str, torch.Tensor]:
    """``agents[k]``'s reasoning (:func:`explain_actions`) in the games where ``group`` ([B]
    int64) is ``k``, assembled into ``[B, A]`` tensors (a label only some agents give is 0 in
    the other rows)."""
    reasons: dict[str, torch.Tensor] = {}
    for k in group.unique().tolist():
        rows = (group == k).nonzero().squeeze(1)
        if len(rows) == batch.batch_size:
            return explain_actions(agents[k], batch)
        for label, values in explain_actions(agents[k], batch.select(rows)).items():
            shape = (batch.batch_size, values.shape[1])
            reasons.setdefault(label, values.new_zeros(shape))[rows] = values
    return reasons


def deal_uniforms(batch: GameBatch) -> torch.Tensor:
    """[B] float64 in [0, 1): a fixed pseudo-random number per deal (a hash of the shuffled
    deck), the same in every state of a round and in both seatings of a duplicate pair.

    Zobrist hashing: a fixed random 52-bit key per (deck position, card type), summed over
    the deck. Distinct deals collide with probability about 2^-52, where a weighted sum of
    the card ids gave 1,724 distinct numbers to 2,000 deals (so SD-CFR's draw of an
    iteration was shared by about one pair of rounds in seven).
    """
    deck = batch.deck.long()  # [B, N]
    keys = _zobrist_keys(deck.shape[1], batch.rules.n_types).to(deck.device)  # [N, T]
    key = keys.gather(1, deck.t()).sum(0)  # [B]; < N * 2^52: no overflow in int64
    return (key % _KEY_RANGE).double() / _KEY_RANGE


_KEY_RANGE = 2**52  # float64 holds every such integer exactly


@functools.cache
def _zobrist_keys(n_positions: int, n_types: int) -> torch.Tensor:
    """[N, T] int64 keys in [0, 2^52), the same in every process (a fixed seed)."""
    generator = torch.Generator().manual_seed(0x5D_CF)
    return torch.randint(0, _KEY_RANGE, (n_positions, n_types), generator=generator)


class SnapshotAgent:
    """SD-CFR's average strategy: one stored iteration per round, drawn by its linear weight.

    Args:
        snapshots: per stored iteration, its two advantage networks.
        weights: per stored iteration, its weight (``t ** exponent``).
        greedy: each iteration's current strategy plays its most probable action.
        seed: seeds sampling within an iteration's strategy.
        name: label in results.
    """

    def __init__(
        self,
        snapshots: Sequence[Sequence[nn.Module]],
        weights: Sequence[float],
        greedy: bool = False,
        seed: int | None = None,
        name: str = "sdcfr",
    ) -> None:
        if not snapshots:
            raise ConfigError(
                "policy 'sdcfr' needs stored iterations: train with DeepCFR(snapshots=True)"
            )
        self.agents = [current_agent(nets, greedy, seed, name) for nets in snapshots]
        cumulative = torch.tensor(weights, dtype=torch.float64).cumsum(0)
        self.bounds = cumulative / cumulative[-1]  # [K] upper bound of each iteration's share
        self.name = name

    def act(self, batch: GameBatch) -> torch.Tensor:
        drawn = self._drawn(batch)  # [B]
        actions = torch.zeros(batch.batch_size, dtype=torch.int64, device=batch.device)
        for k in drawn.unique().tolist():
            rows = (drawn == k).nonzero().squeeze(1)
            whole = len(rows) == batch.batch_size
            actions[rows] = self.agents[k].act(batch if whole else batch.select(rows))
        return actions

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """The reasoning of the iteration each game's deal drew: its current strategy and
        advantages ([B, A] each)."""
        return explain_by_group(batch, self._drawn(batch), self.agents)

    def _drawn(self, batch: GameBatch) -> torch.Tensor:
        """[B] int64: the stored iteration each game's deal plays."""
        drawn = torch.searchsorted(self.bounds, deal_uniforms(batch).cpu(), right=True)
        return drawn.clamp(max=len(self.agents) - 1).to(batch.device)


def policy_agent(
    strategy_net: nn.Module,
    advantage_nets: Sequence[nn.Module],
    policy: str = "average",
    greedy: bool = False,
    seed: int | None = None,
    name: str | None = None,
    snapshots: Sequence[Sequence[nn.Module]] = (),
    snapshot_weights: Sequence[float] = (),
) -> Agent:
    """The agent playing the ``"average"``, ``"current"`` or ``"sdcfr"`` strategy.

    Args:
        strategy_net: the average-strategy network (logits, masked softmax).
        advantage_nets: one advantage network per player (regret matching).
        policy: ``"average"``, ``"current"`` or ``"sdcfr"`` (module docstring).
        greedy: play the most probable action instead of sampling.
        seed: seeds sampling.
        name: label in results (default: the policy's name).
        snapshots: for ``"sdcfr"``, every stored iteration's advantage networks.
        snapshot_weights: for ``"sdcfr"``, their weights.
    """
    name = name or policy
    if policy == "average":
        return NetworkAgent(strategy_net, masked_softmax, greedy=greedy, seed=seed, name=name)
    if policy == "current":
        return current_agent(advantage_nets, greedy, seed, name)
    if policy == "sdcfr":
        return SnapshotAgent(snapshots, snapshot_weights, greedy, seed, name)
    raise ConfigError(f"policy={policy!r}; expected one of {POLICIES}")


def exact_policy(
    strategy_net: nn.Module | None,
    advantage_nets: Sequence[nn.Module],
    policy: str = "average",
    greedy: bool = False,
) -> JointPolicy:
    """A model's ``policy`` as the exact walk asks it (``features [n, F], legal [n, A] ->
    probabilities [n, A]``): the strategy network's softmax (``average``, both seats alike),
    or regret matching on each seat's advantage network (``current``, a pair); ``greedy``
    puts all the mass on the most probable action, as the greedy agent plays. ``sdcfr``
    draws an iteration per game, which no table of action probabilities holds."""
    if policy == "average":
        heads = [(strategy_net, masked_softmax)]
    elif policy == "current":
        heads = [(net, regret_matching) for net in advantage_nets]
    else:
        raise ConfigError(
            f"policy {policy!r} has no exact table of probabilities; use average or current"
        )

    def seat_policy(net: nn.Module, head: Callable) -> Policy:
        def probabilities(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                probs = head(net(features), legal).float()  # [n, A]
            if greedy:
                probs = torch.zeros_like(probs).scatter_(1, probs.argmax(1, keepdim=True), 1.0)
            return probs

        return probabilities

    policies = [seat_policy(net, head) for net, head in heads]
    return policies[0] if len(policies) == 1 else policies
