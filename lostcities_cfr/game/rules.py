"""The rules configuration of Lost Cities (the rules page: ``docs/rules.md``).

Every number of the game is a field here, so small variants used by tests and by
exact exploitability run on the same engines as the classic game. The derived
quantities (card types, action ids) are properties so that no caller recomputes
them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from lostcities_cfr.errors import ConfigError


@dataclass(frozen=True)
class Rules:
    """One variant of the game.

    Args:
        n_colors: expeditions (5 classic, 6 in the 2019 edition).
        n_ranks: number cards per colour.
        min_rank: face value of the lowest number card.
        n_wagers: identical wager cards per colour.
        hand_size: cards in each hand.
        expedition_cost: subtracted from every started expedition.
        bonus_threshold: cards in an expedition (wagers included) that earn the bonus.
        bonus: added (not multiplied) once the threshold is reached.
        max_turns: safety cap on half-turns (decisions); the round ends with the
            current scores when it is reached. Large enough never to bind in
            ordinary play; no traversal code relies on it.
    """

    n_colors: int = 5
    n_ranks: int = 9
    min_rank: int = 2
    n_wagers: int = 3
    hand_size: int = 8
    expedition_cost: int = 20
    bonus_threshold: int = 8
    bonus: int = 20
    max_turns: int = 10_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"Rules.{f.name}={value!r} is invalid: it must be an int")
        _require(1 <= self.n_colors <= 8, "n_colors", self.n_colors, "between 1 and 8")
        _require(1 <= self.n_ranks <= 20, "n_ranks", self.n_ranks, "between 1 and 20")
        _require(self.min_rank >= 0, "min_rank", self.min_rank, ">= 0")
        _require(0 <= self.n_wagers <= 5, "n_wagers", self.n_wagers, "between 0 and 5")
        _require(self.hand_size >= 1, "hand_size", self.hand_size, ">= 1")
        _require(
            2 * self.hand_size < self.deck_size,
            "hand_size",
            self.hand_size,
            f"small enough that the deck keeps cards after the deal "
            f"(2 * hand_size < deck size {self.deck_size})",
        )
        _require(self.expedition_cost >= 0, "expedition_cost", self.expedition_cost, ">= 0")
        _require(self.bonus_threshold >= 1, "bonus_threshold", self.bonus_threshold, ">= 1")
        _require(self.bonus >= 0, "bonus", self.bonus, ">= 0")
        _require(
            2 <= self.max_turns <= 1_000_000, "max_turns", self.max_turns, "between 2 and 1000000"
        )

    # ---- presets -------------------------------------------------------------------------
    @classmethod
    def presets(cls) -> tuple[str, ...]:
        """The names of the preset variants, as configs and command lines spell them."""
        return tuple(_PRESETS)

    @classmethod
    def preset(cls, name: str) -> Rules:
        """The preset variant called ``name`` (one of :meth:`presets`).

        Raises:
            ConfigError: ``name`` is not a preset (names the value and the choices).
        """
        if name not in _PRESETS:
            raise ConfigError(
                f"unknown rules preset {name!r}; expected one of {list(cls.presets())}"
            )
        return _PRESETS[name]()

    def preset_name(self) -> str:
        """The preset these rules equal (``classic``...), or ``custom``."""
        return next((name for name in _PRESETS if Rules.preset(name) == self), "custom")

    @classmethod
    def classic(cls) -> Rules:
        """The classic game: 5 colours, cards 2..10, 3 wagers each, 60 cards."""
        return cls()

    @classmethod
    def six_colors(cls) -> Rules:
        """The 2019 edition's sixth expedition: 72 cards."""
        return cls(n_colors=6)

    @classmethod
    def tiny(cls) -> Rules:
        """A variant whose whole game tree, chance included, is walked in seconds.

        Two colours of one wager and two number cards (2, 3): six cards, hands of
        two, two cards left in the deck. The expedition cost and bonus are scaled
        so that opening, wagering and the bonus all still matter. ``max_turns``
        caps pile-draw loops so that the tree is finite.
        """
        return cls(
            n_colors=2,
            n_ranks=2,
            min_rank=2,
            n_wagers=1,
            hand_size=2,
            expedition_cost=4,
            bonus_threshold=3,
            bonus=2,
            max_turns=8,
        )

    # ---- derived sizes and ids -------------------------------------------------------------
    @property
    def n_types(self) -> int:
        """T: card types; a wager type plus ``n_ranks`` number types per colour."""
        return self.n_colors * (self.n_ranks + 1)

    @property
    def deck_size(self) -> int:
        return self.n_colors * (self.n_wagers + self.n_ranks)

    @property
    def pile_capacity(self) -> int:
        """L: the most cards one colour's discard pile can hold."""
        return self.n_wagers + self.n_ranks

    @property
    def n_actions(self) -> int:
        """A = 2T + 1 + C: play(t), discard(t), draw from deck, draw from pile c."""
        return 2 * self.n_types + 1 + self.n_colors

    @property
    def draw_deck_action(self) -> int:
        return 2 * self.n_types

    def type_id(self, color: int, r: int) -> int:
        """Card type of colour ``color`` and rank index ``r`` (0 = wager)."""
        return color * (self.n_ranks + 1) + r

    def type_color_rank(self, t: int) -> tuple[int, int]:
        return divmod(t, self.n_ranks + 1)

    def face_value(self, r: int) -> int:
        """Face value of rank index r (0 for a wager)."""
        return 0 if r == 0 else self.min_rank + r - 1

    def copies(self, t: int) -> int:
        """How many physical cards share type ``t``."""
        return self.n_wagers if t % (self.n_ranks + 1) == 0 else 1

    def play_action(self, t: int) -> int:
        return t

    def discard_action(self, t: int) -> int:
        return self.n_types + t

    def draw_pile_action(self, color: int) -> int:
        return 2 * self.n_types + 1 + color

    def full_deck(self) -> list[int]:
        """Every physical card's type id, sorted (the unshuffled deck)."""
        return [t for t in range(self.n_types) for _ in range(self.copies(t))]

    def card_name(self, t: int) -> str:
        """Short human name: colour letter then ``*`` for a wager or the face value (``R7``, ``B*``)."""
        color, r = self.type_color_rank(t)
        letter = COLOR_LETTERS[color]
        return f"{letter}*" if r == 0 else f"{letter}{self.face_value(r)}"

    def action_name(self, action: int) -> str:
        """Human name of an action id (``play R7``, ``discard B*``, ``draw deck``, ``draw pile G``)."""
        T = self.n_types
        if not 0 <= action < self.n_actions:
            return f"action {action} (out of range 0..{self.n_actions - 1})"
        if action < T:
            return f"play {self.card_name(action)}"
        if action < 2 * T:
            return f"discard {self.card_name(action - T)}"
        if action == 2 * T:
            return "draw deck"
        return f"draw pile {COLOR_LETTERS[action - 2 * T - 1]}"


_PRESETS = {"classic": Rules.classic, "six-colors": Rules.six_colors, "tiny": Rules.tiny}

COLOR_LETTERS = "RGBWYPOC"  # red, green, blue, white, yellow, purple (2019), spares for variants
COLOR_NAMES = ("red", "green", "blue", "white", "yellow", "purple", "orange", "cyan")


def _require(ok: bool, field: str, value: object, constraint: str) -> None:
    if not ok:
        raise ConfigError(f"Rules.{field}={value!r} is invalid: it must be {constraint}")
