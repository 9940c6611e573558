"""Magnetic mirror descent's magnet for PPO: a policy the learner is pulled towards.

Magnetic mirror descent (MMD; Sokota, D'Orazio, Kolter, Loizou, Lanctot, Mitliagkas, Brown
& Kroer, "A Unified Approach to Reinforcement Learning, Quantal Response Equilibria, and
Two-Player Zero-Sum Games", ICLR 2023) updates a policy by

    pi_{t+1} = argmax_pi  <q_t, pi> - alpha KL(pi || rho) - (1 / eta) KL(pi || pi_t)

in every information state: a mirror-descent step (its proximity term, which PPO's
clipped ratio plays here) plus a pull of strength ``alpha`` towards a *magnet* ``rho``.
With a fixed magnet it converges, in the last iterate, to the regularised (quantal
response) equilibrium around ``rho``; moving the magnet towards the policy as it learns
moves that equilibrium towards a Nash equilibrium. As a self-play RL algorithm it is PPO's
loss plus ``alpha`` times ``KL(pi || rho)`` on the rollout's rows.

:class:`Magnet` is ``rho``: a copy of the policy network whose parameters follow the
policy's by an exponential moving average, once an iteration,
``theta_rho <- decay theta_rho + (1 - decay) theta_pi`` (``decay`` 1: the initial policy,
fixed; 0: last iteration's policy).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from lostcities_cfr.cfr.networks import masked_log_softmax


def kl_divergence(
    log_pi: torch.Tensor, magnet_logits: torch.Tensor, legal: torch.Tensor
) -> torch.Tensor:
    """Mean over rows of ``KL(pi || rho)``: ``log_pi`` [n, A] the policy's log-probabilities
    (its masked log-softmax, which PPO's loss has computed already), ``rho`` the masked
    softmax of ``magnet_logits`` [n, A] over the legal actions ``legal`` [n, A] bool."""
    log_rho = masked_log_softmax(magnet_logits, legal)  # [n, A]
    # illegal entries: probability 0 times a difference of huge negatives, masked out
    terms = (log_pi.exp() * (log_pi - log_rho)).masked_fill(~legal, 0.0)
    return terms.sum(1).mean()


class Magnet(nn.Module):
    """``rho``: a frozen copy of ``policy`` that follows it once an iteration (module
    docstring). A submodule of the PPO module, so checkpoints hold it."""

    def __init__(self, policy: nn.Module, decay: float) -> None:
        super().__init__()
        self.decay = decay
        self.net = copy.deepcopy(policy).requires_grad_(False)

    def kl(self, log_pi: torch.Tensor, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """``KL(pi || rho)`` on rows whose policy log-probabilities are ``log_pi`` [n, A]."""
        with torch.no_grad():
            magnet_logits = self.net(features)
        return kl_divergence(log_pi, magnet_logits, legal)

    @torch.no_grad()
    def follow(self, policy: nn.Module) -> None:
        """One step of the moving average towards ``policy``'s parameters."""
        for mine, theirs in zip(self.net.parameters(), policy.parameters(), strict=True):
            mine.lerp_(theirs, 1.0 - self.decay)
