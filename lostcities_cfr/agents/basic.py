"""Baseline agents: uniform random, discard-only, and an epsilon-random wrapper.

They bound what "learned something" means from below: a trained agent that does
not beat :class:`RandomAgent` and :class:`DiscardOnlyAgent` (which always scores 0)
by a wide margin has learned nothing useful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lostcities_cfr.agents.base import Agent, AgentRandomness, explain_actions

if TYPE_CHECKING:
    from lostcities_cfr.game.batched import GameBatch


class RandomAgent:
    """Uniform over the legal actions of each decision.

    Args:
        seed: seeds its generator; ``None`` draws fresh entropy.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.name = "random"
        self._rng = AgentRandomness(seed)

    def act(self, batch: GameBatch) -> torch.Tensor:
        return self._rng.choose_legal(batch.legal_mask())

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """Its policy, uniform over the legal actions (``"probability"``, [B, A])."""
        return {"probability": _uniform_over_legal(batch.legal_mask())}


class DiscardOnlyAgent:
    """Never plays a card: discards a uniformly random card, then draws from the deck.

    It never opens an expedition, so it always scores 0; beating it measures
    whether an agent's own expeditions end positive.

    Args:
        seed: seeds the choice of the card to discard.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.name = "discard-only"
        self._rng = AgentRandomness(seed)

    def act(self, batch: GameBatch) -> torch.Tensor:
        legal = batch.legal_mask()  # [B, A] bool
        T = batch.rules.n_types
        discards = torch.zeros_like(legal)
        discards[:, T : 2 * T] = legal[:, T : 2 * T]
        card_phase = batch.phase == 0  # [B]
        discard = self._rng.choose_legal(discards)
        # The deck is never empty while a game is running, so drawing from it is always legal.
        return torch.where(card_phase, discard, batch.rules.draw_deck_action)


class NoisyAgent:
    """Plays a uniformly random legal action with probability ``epsilon``, else ``agent``'s.

    Makes a deterministic agent a less predictable opponent; the spec suffix
    ``:noisy=EPS`` wraps any agent in it (``heuristic:balanced:noisy=0.15``).

    Args:
        agent: the agent followed with probability ``1 - epsilon``.
        epsilon: probability of a random legal action, in [0, 1].
        seed: seeds both the coin and the random action.
    """

    def __init__(self, agent: Agent, epsilon: float, seed: int | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"NoisyAgent epsilon={epsilon!r} must lie in [0, 1]")
        self.agent = agent
        self.epsilon = epsilon
        self.name = f"{agent.name}:noisy={epsilon:g}"
        self.rules = getattr(agent, "rules", None)  # the rules it was made for, if it says
        self._rng = AgentRandomness(seed)

    def act(self, batch: GameBatch) -> torch.Tensor:
        chosen = self.agent.act(batch)  # [B] int64
        random_action = self._rng.choose_legal(batch.legal_mask())
        explore = self._rng.uniform((batch.batch_size,), chosen.device) < self.epsilon
        return torch.where(explore, random_action, chosen)

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """The wrapped agent's reasoning, its ``"probability"`` mixed with the uniform one:
        ``(1 - epsilon) * policy + epsilon * uniform`` ([B, A])."""
        reasons = explain_actions(self.agent, batch)
        uniform = _uniform_over_legal(batch.legal_mask())
        mixed = (1 - self.epsilon) * reasons["probability"] + self.epsilon * uniform
        return {**reasons, "probability": mixed}


def _uniform_over_legal(legal: torch.Tensor) -> torch.Tensor:
    """[B, A] bool -> [B, A] float32: 1 / (legal actions) on each legal action."""
    legal = legal.float()
    return legal / legal.sum(1, keepdim=True).clamp(min=1.0)
