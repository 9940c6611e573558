"""Games by the names command lines use: OpenSpiel's (``kuhn_poker``, ``leduc_poker`` and
``liars_dice``, default parameters, on our batched engines; any other through the OpenSpiel
adapter) and Lost Cities' presets
(``tiny``, ``classic``, ``six-colors``, also spelt ``lost_cities_tiny`` as
``LostCities.name`` gives them)."""

from __future__ import annotations

from lostcities_cfr.game.liars_dice import LiarsDice
from lostcities_cfr.game.lost_cities import LostCities
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker
from lostcities_cfr.game.protocol import Game
from lostcities_cfr.game.rules import Rules

BATCHED_GAMES: dict[str, type[Game]] = {
    "kuhn_poker": KuhnPoker,
    "leduc_poker": LeducPoker,
    "liars_dice": LiarsDice,
}


def game_from_name(name: str) -> Game:
    """The game called ``name``; an unknown name raises ``ConfigError`` (from OpenSpiel's
    adapter, which names it, or says how to install OpenSpiel)."""
    if name in BATCHED_GAMES:
        return BATCHED_GAMES[name]()
    preset = name.removeprefix("lost_cities_").removeprefix("lost_cities")
    if name.startswith("lost_cities") or name in Rules.presets():
        return LostCities(preset or "classic")
    from lostcities_cfr.game.openspiel_adapter import OpenSpielGame  # imports pyspiel

    return OpenSpielGame(name)
