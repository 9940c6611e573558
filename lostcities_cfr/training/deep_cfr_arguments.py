"""DeepCFR's arguments checked against one another, against its game and against its
device, and the networks its network arguments name.

Kept apart from the LightningModule (``module.py``) so that the module reads as the algorithm.
"""

from __future__ import annotations

import torch
from torch import nn

from lostcities_cfr.cfr.networks import (
    NetworkConfig,
    NetworkFactory,
    NetworkPreset,
    build_network,
    network_factory,
)
from lostcities_cfr.cfr.traversal import Sampler
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.lost_cities import LostCities
from lostcities_cfr.game.protocol import Game


def check_regret_options(
    regret_targets: str, discount_alpha: float | None, predictive: bool, update_graphs: bool
) -> None:
    """Refuse a regret option that the chosen targets would ignore."""
    if discount_alpha is not None and regret_targets != "cumulative":
        raise ConfigError(
            f"DeepCFR discount_alpha={discount_alpha} discounts cumulative regrets; "
            "it needs regret_targets='cumulative'"
        )
    if predictive and (regret_targets != "sampled" or update_graphs):
        # A recorded graph would keep the iteration it was recorded at.
        raise ConfigError(
            "DeepCFR predictive=True weighs sampled rows by the iteration running: it "
            "needs regret_targets='sampled' and update_graphs=False"
        )


def refuse_lost_cities_options(
    game: Game, sampler: Sampler, final_eval_games: int, color_augmentation: bool
) -> None:
    """Refuse, in one line naming the game, what only Lost Cities has."""
    if final_eval_games:
        raise ConfigError(
            f"DeepCFR final_eval_games={final_eval_games}: the final duplicate games are "
            f"Lost Cities only; the game here is {game.name} (set final_eval_games: 0 and "
            "measure it with exploitability_every)"
        )
    if color_augmentation:
        raise ConfigError(
            f"DeepCFR color_augmentation=True relabels Lost Cities' colours; the game here "
            f"is {game.name}"
        )
    guide = getattr(sampler, "guide", None)
    if guide:
        raise ConfigError(
            f"DeepCFR sampler {type(sampler).__name__} guide={guide!r} is a Lost Cities agent; "
            f"the game here is {game.name} (set guide: null)"
        )
    if getattr(sampler, "lost_cities_only", False):
        raise ConfigError(
            f"DeepCFR sampler {type(sampler).__name__} is for Lost Cities only; the game here "
            f"is {game.name} (use ExternalSampling, OutcomeSampling or ESCHERSampling)"
        )


def check_update_graphs(device: torch.device, precision: str) -> None:
    """Refuse ``update_graphs=True`` where CUDA graphs cannot record the updates."""
    if device.type != "cuda":
        raise ConfigError(
            f"DeepCFR update_graphs=True records the updates as CUDA graphs, which needs a "
            f"CUDA device; this run trains on {device.type} (--trainer.accelerator gpu, or "
            "update_graphs: false)"
        )
    if "mixed" in precision:
        raise ConfigError(
            f"DeepCFR update_graphs=True cannot record under precision={precision!r} "
            "(autocast caches casts across a graph's replays); use 32-true or bf16-true"
        )


def build_networks(
    network: NetworkPreset | NetworkConfig | NetworkFactory,
    field: str,
    n_features: int,
    n_actions: int,
    game: Game,
    count: int = 1,
) -> list[nn.Module]:
    """``count`` fresh networks of the kind ``network`` names, each checked
    (:func:`~lostcities_cfr.cfr.networks.build_network`); an error names ``field``."""
    rules = game.rules if isinstance(game, LostCities) else None
    try:
        config = NetworkConfig.preset(network) if isinstance(network, str) else network
        if rules is None and isinstance(config, NetworkConfig) and config.needs_rules:
            raise ConfigError(
                "colour networks (architecture='colors', hidden_features) are for Lost "
                f"Cities only; the game here is {game.name}"
            )
        build = network_factory(network, rules)
        return [build_network(build, n_features, n_actions) for _ in range(count)]
    except ConfigError as error:
        raise ConfigError(f"DeepCFR {field}: {error}") from None
