"""An agent that plays a policy network: features in, one action per game out.

Any ``nn.Module`` mapping information-state features ``[B, F]``
(:meth:`GameBatch.encode`) to one output per action ``[B, A]`` can play, with a
``head(outputs, legal) -> policy [B, A]`` that turns outputs into a strategy
with probability 0 on illegal actions: a masked softmax for a Deep CFR
strategy network, regret matching for an advantage network (both in
:mod:`lostcities_cfr.cfr`; the agent layer sits below it and takes the head as
an argument). One forward pass serves the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from lostcities_cfr.agents.base import AgentRandomness
from lostcities_cfr.game.batched import GameBatch

PolicyHead = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class NetworkAgent:
    """Plays ``head(network(features), legal)``, greedily or by sampling.

    Args:
        network: features ``[B, F]`` -> outputs ``[B, A]``; used as given (put it in
            eval mode yourself if it has dropout or batch norm).
        head: ``(outputs [B, A], legal [B, A] bool) -> policy [B, A]`` with zero
            probability on illegal actions.
        greedy: play the most probable legal action (ties: lowest id) instead of sampling.
        seed: seeds sampling.
        name: label in results.
        outputs_label: what the network's outputs are, shown beside the policy by
            :meth:`explain` (``"advantage"`` for an advantage network); ``None`` shows the
            policy only (a strategy network's logits say nothing the policy does not).
    """

    def __init__(
        self,
        network: nn.Module,
        head: PolicyHead,
        greedy: bool = False,
        seed: int | None = None,
        name: str = "network",
        outputs_label: str | None = None,
    ) -> None:
        self.network = network
        self.head = head
        self.greedy = greedy
        self.name = name
        self.outputs_label = outputs_label
        self._rng = AgentRandomness(seed)

    def policy(self, batch: GameBatch) -> torch.Tensor:
        """[B, A] float32: the strategy in every game (all zeros in finished ones)."""
        return self._policy_and_legal(batch)[0]

    def explain(self, batch: GameBatch) -> dict[str, torch.Tensor]:
        """The policy (``"probability"``, [B, A]) and, with ``outputs_label``, the network's
        outputs under that label (:class:`~lostcities_cfr.agents.base.Explainer`)."""
        policy, _, outputs = self._forward(batch)
        if self.outputs_label is None:
            return {"probability": policy}
        return {"probability": policy, self.outputs_label: outputs}

    def act(self, batch: GameBatch) -> torch.Tensor:
        policy, legal = self._policy_and_legal(batch)  # [B, A] float, [B, A] bool
        if self.greedy:
            return torch.where(legal, policy, -1.0).argmax(dim=1)
        # finished games have no legal action: give them any distribution to sample from
        policy = torch.where(legal.any(dim=1, keepdim=True), policy, 1.0)
        generator = self._rng.generator(policy.device)
        return torch.multinomial(policy, 1, generator=generator).squeeze(1)

    def _policy_and_legal(self, batch: GameBatch) -> tuple[torch.Tensor, torch.Tensor]:
        return self._forward(batch)[:2]

    @torch.inference_mode()
    def _forward(self, batch: GameBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(policy [B, A], legal [B, A] bool, the network's outputs [B, A] float32)."""
        features, legal = batch.encode(), batch.legal_mask()
        weight = next(self.network.parameters(), None)
        if weight is not None:  # a bfloat16 network takes bfloat16 features
            features = features.to(weight.device, weight.dtype)
        outputs = self.network(features).float().to(batch.device)
        return self.head(outputs, legal), legal, outputs
