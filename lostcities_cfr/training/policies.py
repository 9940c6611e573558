"""The policies a Deep CFR model plays: its agents, the exact walk's policies, SD-CFR's
stored iterations and the value network a search asks.

:class:`DeepCFRPolicies` is the part of :class:`~lostcities_cfr.training.module.DeepCFR`
that turns its networks into something to play or measure: ``average`` (the strategy
network), ``current`` (regret matching on the advantage networks) and, with ``snapshots``,
``sdcfr`` (every stored iteration's advantage networks, rebuilt from their weights). The
arena, the callbacks, checkpoints' agents and ``exploitability_every`` ask for these; the
iteration itself (``loop.py``) never plays them, which is why they live apart from the
model's state (``module.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lostcities_cfr.agents import Agent
from lostcities_cfr.cfr.exploitability import game_tree
from lostcities_cfr.cfr.game_tree import JointPolicy
from lostcities_cfr.cfr.networks import masked_softmax
from lostcities_cfr.cfr.openspiel_oracle import lookup_policy, sdcfr_average
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.search import StateValue
from lostcities_cfr.training.agents import POLICIES, exact_policy, policy_agent
from lostcities_cfr.training.deep_cfr_arguments import build_networks
from lostcities_cfr.training.evaluation import deployed_policy, exploitability_metrics


class DeepCFRPolicies:
    """The policies of ``DeepCFR`` (module docstring), mixed into it.

    What it uses of the module: ``hparams`` (``snapshots``, ``deploy``),
    ``average_exponent``, ``strategy_net``, ``advantage_nets``, ``value_net``, ``sampler``,
    ``_snapshots`` and ``_network``, ``game`` and ``rules``, and Lightning's ``device`` and
    ``dtype``.
    """

    @property
    def policies(self) -> tuple[str, ...]:
        """The policies :meth:`agent` plays: ``sdcfr`` only with ``snapshots``."""
        return POLICIES if self.hparams.snapshots else POLICIES[:2]

    def agent(
        self, policy: str | None = None, greedy: bool = False, seed: int | None = None
    ) -> Agent:
        """A batched agent playing the ``"average"`` (strategy network), ``"current"``
        (regret matching on the advantage networks) or ``"sdcfr"`` strategy; None plays
        ``deploy``, greedily where it says so (``greedy`` too)."""
        if policy is None:
            policy, deployed_greedy = deployed_policy(self)
            greedy = greedy or deployed_greedy
        return policy_agent(
            self.strategy_net,
            self.advantage_nets,
            policy,
            greedy,
            seed,
            snapshots=self._snapshot_networks() if policy == "sdcfr" else (),
            snapshot_weights=self._snapshot_weights(),
        )

    def state_value(self) -> StateValue | None:
        """The history value network V(h) in points, for a search to value sampled worlds
        with (``docs/search.md``); None without a value-baseline sampler."""
        if self.value_net is None:
            return None
        return StateValue(self.value_net, history=True, scale=self.sampler.utility_scale)

    def _snapshot_weights(self) -> list[float]:
        """SD-CFR's weight of every stored iteration ``t``: ``t ** average_exponent``."""
        return [float(t) ** self.average_exponent for t, _ in self._snapshots]

    def _snapshot_networks(self) -> list[list[nn.Module]]:
        """Every stored iteration's advantage networks, rebuilt from their weights."""
        F, A = self.game.feature_size, self.game.n_actions
        stored = []
        for _, states in self._snapshots:
            nets = build_networks(self._network, "network", F, A, self.game, len(states))
            for net, state in zip(nets, states, strict=True):
                net.load_state_dict(state)
                net.eval()
            stored.append(nets)
        return stored

    def exact_policy(self, policy: str | None = None, greedy: bool = False) -> JointPolicy:
        """``policy`` (None: ``deploy``'s) as the exact walk asks it, on the CPU. SD-CFR's is
        the reach-weighted average of every stored iteration's current strategy, a table over
        the game's information sets: on our walk's tree (``GameTree.average_strategy``), or,
        for an OpenSpiel game too large for it, over OpenSpiel's information states
        (``openspiel_oracle.sdcfr_average``)."""
        if policy is None:
            policy, deployed_greedy = deployed_policy(self)
            greedy = greedy or deployed_greedy
        if policy != "sdcfr":
            return exact_policy(self.strategy_net, self.advantage_nets, policy, greedy)
        if not self._snapshots:
            raise ConfigError("DeepCFR has no stored iterations for the sdcfr policy yet")
        policies = [
            exact_policy(self.strategy_net, nets, "current") for nets in self._snapshot_networks()
        ]
        try:
            tree = game_tree(self.rules or self.game)
        except ConfigError:
            # check_exact's rule: Lost Cities and games OpenSpiel lacks have no other walk.
            spiel_game = None if self.rules is not None else self.game.openspiel_game()
            if spiel_game is None:
                raise
            average = sdcfr_average(spiel_game, policies, self._snapshot_weights())
            if greedy:
                probs = average.action_probability_array
                average.action_probability_array = np.eye(probs.shape[1])[probs.argmax(1)]
            return lookup_policy(average)
        tables = [tree.policy_probs(seat_policies) for seat_policies in policies]
        probs = tree.average_strategy(tables, self._snapshot_weights())  # [I, A]
        if greedy:
            probs = np.eye(probs.shape[1])[probs.argmax(1)]
        return tree.table_policy(probs)

    def average_policy(self, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """The average strategy [n, A] for features [n, F] and legal [n, A] bool."""
        with torch.inference_mode():
            logits = self.strategy_net(features.to(self.device, self.dtype)).float()
            return masked_softmax(logits, legal.to(self.device)).to(features.device)

    def exploitability_metrics(self) -> dict[str, float]:
        """``exploitability`` of the deployed policy (``deploy``; NashConv / 2, OpenSpiel's),
        also as a share of the uniform policy's, and ``nash_conv``."""
        return exploitability_metrics(self.rules or self.game, self.exact_policy())
