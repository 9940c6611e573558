"""The agent interface: a batch of games in, one action per game out.

Every agent is batched: ``act`` sees a :class:`~lostcities_cfr.game.batched.GameBatch`
and returns an int64 tensor ``[B]`` with a legal action for every unfinished game
(entries of finished games are ignored by the engine, so they may hold anything).
An agent must decide only from what the player to move knows (``docs/agents.md``):
its own hand and the public information of the rules page (``docs/rules.md``), never the opponent's
hidden cards or the deck order.

:func:`act_single` serves one :class:`~lostcities_cfr.game.reference.GameState`
(terminal play, notebooks) through the same batched code.

An agent may also say why it acts (:class:`Explainer`): ``explain(batch)`` returns labelled
``[B, A]`` tensors, ``"probability"`` always. :func:`explain_actions` and
:func:`act_and_explain` serve every agent, standing in a one-hot of the chosen action for
agents without ``explain``.
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


@runtime_checkable
class Explainer(Protocol):
    """An agent that can show its reasoning (the ``serve`` page, ``docs/agents.md``).

    ``explain(batch)`` maps labels to float ``[B, A]`` tensors over the actions of every
    game: ``"probability"`` (the policy ``act`` samples from, 0 on illegal actions) always;
    ``"advantage"`` for a Deep CFR current strategy (the advantage network's outputs that
    regret matching turned into it); other agents add their own (a search agent's
    ``"searched value"``). Rows of finished games may hold anything.
    """

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """Labelled float ``[B, A]`` tensors; ``"probability"`` always among them."""
        ...


def explain_actions(agent: Agent, batch: GameBatch) -> dict[str, torch.Tensor]:
    """Any agent's :class:`Explainer` reasoning; for an agent without ``explain``, a one-hot
    of the action it chooses as its ``"probability"`` (exact for a deterministic agent such
    as the heuristic, one draw for a random one)."""
    if isinstance(agent, Explainer):
        return agent.explain(batch)
    return {"probability": _one_hot(agent.act(batch), batch.rules.n_actions)}


def act_and_explain(agent: Agent, batch: GameBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The agent's actions ``[B]`` and its reasoning about them (:func:`explain_actions`;
    the one-hot stand-in marks the actions returned). An agent whose decision is itself
    random in what it considers (a search's worlds) gives both from one decision through
    its own ``act_and_explain``."""
    own = getattr(agent, "act_and_explain", None)
    if own is not None:
        return own(batch)
    actions = agent.act(batch)  # [B] int64
    if isinstance(agent, Explainer):
        return actions, agent.explain(batch)
    return actions, {"probability": _one_hot(actions, batch.rules.n_actions)}


def _one_hot(actions: torch.Tensor, n_actions: int) -> torch.Tensor:
    """[B] int64 -> [B, A] float32."""
    return torch.nn.functional.one_hot(actions, n_actions).float()


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
