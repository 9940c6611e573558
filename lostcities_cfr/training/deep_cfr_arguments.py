"""DeepCFR's arguments checked against one another and against its game.

Kept apart from the LightningModule (``module.py``) so that the module reads as the algorithm.
"""

from __future__ import annotations

from lostcities_cfr.cfr.traversal import Sampler
from lostcities_cfr.errors import ConfigError
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
