"""Agents over a Deep CFR model's networks (arena interface: ``act(batch) -> [B]``).

Deep CFR's output is the *average* strategy, learnt by the strategy network; the *current*
strategy (regret matching on a player's advantage network) is what the last iteration
played. The feature vector does not say which seat the viewer holds, and each seat has its
own advantage network, so the current strategy is a pair of network agents with the rows
of every batch routed by the player to move.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lostcities_cfr.agents import Agent, NetworkAgent
from lostcities_cfr.cfr.networks import masked_softmax
from lostcities_cfr.cfr.regret_matching import regret_matching
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch

POLICIES = ("average", "current")


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


def policy_agent(
    strategy_net: nn.Module,
    advantage_nets: Sequence[nn.Module],
    policy: str = "average",
    greedy: bool = False,
    seed: int | None = None,
    name: str | None = None,
) -> Agent:
    """The agent playing the ``"average"`` or ``"current"`` strategy of these networks.

    Args:
        strategy_net: the average-strategy network (logits, masked softmax).
        advantage_nets: one advantage network per player (regret matching).
        policy: ``"average"`` or ``"current"``.
        greedy: play the most probable action instead of sampling.
        seed: seeds sampling.
        name: label in results (default: the policy's name).
    """
    name = name or policy
    if policy == "average":
        return NetworkAgent(strategy_net, masked_softmax, greedy=greedy, seed=seed, name=name)
    if policy == "current":
        seats = [
            NetworkAgent(
                net,
                regret_matching,
                greedy=greedy,
                seed=None if seed is None else seed + p,  # the seats draw different numbers
                name=f"{name}_p{p}",
            )
            for p, net in enumerate(advantage_nets)
        ]
        return SeatAgent(seats, name=name)
    raise ConfigError(f"policy={policy!r}; expected one of {POLICIES}")
