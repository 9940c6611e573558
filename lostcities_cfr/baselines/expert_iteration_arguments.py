"""Expert iteration's base: the network agent it starts from, checked before any game.

Kept apart from the LightningModule (``expert_iteration.py``) so that the module reads as
the algorithm. A base is an agent spec (``best``, ``ckpt:PATH``) whose agent plays a
network's masked softmax: that network is what the search runs over and what learns its
targets. Everything else is refused in one line naming the field.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import nn

from lostcities_cfr.agents import NetworkAgent, agent_from_spec
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.errors import AgentSpecError, CheckpointError, ConfigError
from lostcities_cfr.game import Rules
from lostcities_cfr.game.lost_cities import as_game


@dataclass(frozen=True)
class Base:
    """What expert iteration takes from its base agent."""

    rules: Rules
    policy_net: nn.Module  # a copy: features [n, F] -> logits [n, A]
    value_net: nn.Module | None  # a copy of its information-state value network, if any
    value_scale: float | None  # points per unit of ``value_net``'s output


def load_base(base: str, seed: int) -> Base:
    """The networks of agent spec ``base``, copied (the base's own file is never written).

    Raises:
        ConfigError: the spec does not load, its agent plays another game, or it is no
            network agent with probabilities (a heuristic, a search, SD-CFR's or the
            current strategy's seat agents): soft targets and a network to train on them
            need one.
    """
    try:
        agent = agent_from_spec(base, seed=seed)
    except (AgentSpecError, CheckpointError) as error:
        raise ConfigError(f"ExpertIteration base={base!r}: {error}") from None
    if not isinstance(agent, NetworkAgent) or agent.head is not masked_softmax:
        raise ConfigError(
            f"ExpertIteration base={base!r}: a {type(agent).__name__} offers no network "
            "policy with probabilities, and soft targets and the network trained on them need "
            "one; name a network agent (best, ckpt:PATH of a PPO or Deep CFR run)"
        )
    rules = getattr(agent, "rules", None)
    if not isinstance(rules, Rules):
        raise ConfigError(
            f"ExpertIteration base={base!r}: its agent names no Lost Cities rules, and the "
            "search deals Lost Cities worlds"
        )
    value = getattr(agent, "state_value", None)
    # a history value network (ESCHER's V(h)) reads the whole state, not what a player sees
    information_state = value is not None and not value.history
    # copies in training mode (a loaded agent's are in eval mode, which training warns of)
    return Base(
        rules=rules,
        policy_net=copy.deepcopy(agent.network).train(),
        value_net=copy.deepcopy(value.network).train() if information_state else None,
        value_scale=value.scale if information_state else None,
    )


def build_value_net(base: Base, network: NetworkConfig, reward_scale: float) -> nn.Module:
    """The base's value network where it has one (its scale must be ``reward_scale``), else
    a fresh one of shape ``network``."""
    if base.value_net is None:
        return network.build(as_game(base.rules).feature_size, 1, base.rules)
    if base.value_scale != reward_scale:
        raise ConfigError(
            f"ExpertIteration reward_scale={reward_scale}: the base's value network counts "
            f"{base.value_scale} points per unit; set reward_scale: {base.value_scale}"
        )
    return base.value_net
