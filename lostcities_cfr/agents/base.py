"""The agent interface: a batch of games in, one action per game out.

Every agent is batched: ``act`` sees a :class:`~lostcities_cfr.game.batched.GameBatch`
and returns an int64 tensor ``[B]`` with a legal action for every unfinished game
(entries of finished games are ignored by the engine, so they may hold anything).
An agent must decide only from what the player to move knows (``docs/agents.md``):
its own hand and the public information of the rules page (``docs/rules.md``), never the opponent's
hidden cards or the deck order.

:func:`act_single` serves one :class:`~lostcities_cfr.game.reference.GameState`
(terminal play, notebooks) through the same batched code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from lostcities_cfr.agents.random_actions import random_legal_actions
from lostcities_cfr.game.batched import GameBatch

if TYPE_CHECKING:
    from lostcities_cfr.game.reference import GameState


@runtime_checkable
class Agent(Protocol):
    """Anything with ``act(batch) -> actions``; ``name`` labels it in results (the class
    name stands in where it is missing)."""

    name: str

    def act(self, batch: GameBatch) -> torch.Tensor:
        """A legal action for the player to move in every unfinished game: int64 ``[B]``."""
        ...


def agent_name(agent: Agent) -> str:
    """``agent.name``, or its class name for agents written without one."""
    return getattr(agent, "name", None) or type(agent).__name__


def act_single(agent: Agent, state: GameState) -> int:
    """The action ``agent`` takes in one reference-engine state."""
    if state.is_terminal:
        raise ValueError("act_single needs a state with a player to move; this game is over")
    return int(agent.act(GameBatch.from_states([state]))[0])


class AgentRandomness:
    """Seeded uniform numbers on whatever device a batch lives on.

    One ``torch.Generator`` per device, each seeded from ``seed`` (fresh entropy
    when ``None``), so a seeded agent repeats itself on CPU and on GPU alike
    without moving random tensors between devices.
    """

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def generator(self, device: torch.device) -> torch.Generator:
        """This agent's generator on ``device``, created and seeded on first use."""
        generator = self._generators.get(device)
        if generator is None:
            generator = torch.Generator(device=device)
            if self.seed is None:
                generator.seed()
            else:
                generator.manual_seed(self.seed)
            self._generators[device] = generator
        return generator

    def uniform(self, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """Uniform floats in [0, 1) of ``shape`` on ``device``."""
        return torch.rand(shape, generator=self.generator(device), device=device)

    def choose_legal(self, legal: torch.Tensor) -> torch.Tensor:
        """A uniformly random legal action per row: ``legal`` bool [B, A] -> int64 [B].

        Rows without a legal action (finished games) get action 0.
        """
        return random_legal_actions(legal, self.generator(legal.device))
