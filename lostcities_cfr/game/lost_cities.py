"""Lost Cities as a :class:`~lostcities_cfr.game.protocol.Game`: a rule variant and its
batched engine (:class:`~lostcities_cfr.game.batched.GameBatch`) behind the protocol."""

from __future__ import annotations

import torch

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.encoding import feature_size, history_feature_size
from lostcities_cfr.game.protocol import Game
from lostcities_cfr.game.rules import Rules


class LostCities(Game):
    """Lost Cities under ``rules``: a preset name (``classic``, ``six-colors``, ``tiny``) or
    a :class:`Rules`.

    Its exact exploitability walks the reference engine with perfect-recall information
    sets of its own (``cfr/exploitability.py``), since the features forget the order of
    past events; so it offers no :meth:`deals`.
    """

    def __init__(self, rules: str | Rules = "classic") -> None:
        if not isinstance(rules, Rules):
            rules = Rules.preset(rules)
        self.rules = rules

    @property
    def name(self) -> str:
        """``lost_cities`` for the classic rules, else ``lost_cities_<preset>``."""
        preset = self.rules.preset_name()
        return "lost_cities" if preset == "classic" else f"lost_cities_{preset}"

    @property
    def n_actions(self) -> int:
        return self.rules.n_actions

    @property
    def feature_size(self) -> int:
        return feature_size(self.rules)

    @property
    def history_feature_size(self) -> int:
        return history_feature_size(self.rules)

    def new_batch(
        self,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        kernels: str = "eager",
    ) -> GameBatch:
        return GameBatch.new(self.rules, batch_size, seed=seed, device=device, kernels=kernels)

    def action_name(self, action: int) -> str:
        return self.rules.action_name(action)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LostCities) and other.rules == self.rules

    def __hash__(self) -> int:
        return hash(self.rules)

    def __repr__(self) -> str:
        return f"LostCities({self.rules.preset_name()!r})"


def as_game(game: str | Rules | Game | dict, owner: str | None = None) -> Game:
    """A game from what a config or a caller gives: a :class:`Game` as it is, Lost Cities
    rules (a :class:`Rules`, a mapping of its fields, or a preset name) as
    :class:`LostCities`. An error names ``owner``'s ``rules`` field when given."""
    try:
        if isinstance(game, Game):
            return game
        if isinstance(game, dict) and "class_path" not in game:
            game = Rules(**game)  # Lost Cities' rules as a checkpoint's hyperparameters hold them
        if isinstance(game, str) and "." in game:  # a class path the config could not import
            raise ConfigError(f"{game!r} names no Game class that can be imported")
        if isinstance(game, Rules | str):
            return LostCities(game)
        raise ConfigError(f"{game!r} is not a game: expected a Game, a Rules or a preset name")
    except ConfigError as error:
        if owner is None:
            raise
        raise ConfigError(
            f"{owner} rules: {error} (a game is a Lost Cities preset, a Rules mapping of its "
            "fields, or a Game's class_path)"
        ) from None


def lost_cities_rules(game: Game, what: str) -> Rules:
    """The rules of ``game`` for a part that only Lost Cities has (``what`` names it);
    another game is refused in one line that names both."""
    if isinstance(game, LostCities):
        return game.rules
    raise ConfigError(f"{what} is for Lost Cities only; the game here is {game.name}")
