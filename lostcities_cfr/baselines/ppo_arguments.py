"""PPO's arguments checked against its game: what it refuses, and how it reads a network.

Kept apart from the LightningModule (``ppo.py``) so that the module reads as the algorithm.
"""

from __future__ import annotations

from lostcities_cfr.baselines.rollout import LEARNER
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.protocol import Game


def refuse_lost_cities_options(
    game: Game,
    network: NetworkConfig,
    bc_teacher: str | None,
    bc_iterations: int,
    opponent: str | None,
) -> None:
    """Refuse, in one line naming the game, what only Lost Cities has."""
    if bc_teacher is not None or bc_iterations:
        field = f"bc_teacher={bc_teacher!r}" if bc_teacher else f"bc_iterations={bc_iterations}"
        raise ConfigError(
            f"PPO {field}: behaviour cloning copies a teacher agent, and agents play Lost "
            f"Cities only; the game here is {game.name} (set bc_teacher: null and "
            "bc_iterations: 0)"
        )
    if opponent is not None:
        raise ConfigError(
            f"PPO opponent={opponent!r}: a fixed opponent agent plays Lost Cities only; the "
            f"game here is {game.name} (set opponent: null: self-play against the pool)"
        )
    if network.needs_rules:
        raise ConfigError(
            "PPO network: colour networks (architecture='colors', hidden_features) are for "
            f"Lost Cities only; the game here is {game.name}"
        )


def policy_name(policy: str | None) -> str:
    """PPO's one policy's name, which ``None`` stands for; any other is refused."""
    if policy not in (None, LEARNER):
        raise ConfigError(f"PPO policy={policy!r}; its only policy is {LEARNER!r}")
    return LEARNER


def resolve_network(network: str | NetworkConfig) -> NetworkConfig:
    """The network of a config: a :class:`NetworkConfig`, its fields as a dict, or a preset
    name (``"128x3"``); a bad preset is refused naming PPO's field."""
    if isinstance(network, NetworkConfig):
        return network
    if isinstance(network, dict):
        return NetworkConfig(**network)
    try:
        return NetworkConfig.preset(network)
    except ConfigError as error:
        raise ConfigError(f"PPO network: {error}") from None
