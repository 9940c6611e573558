"""The reference engine: one game of Lost Cities in plain Python.

It follows the rules page (``docs/rules.md``) line by line and is written to be read, not to be fast:
tests hold the batched engine equal to it, people play against agents through it,
and the exact exploitability check of tiny variants walks its game tree.

A state stores every card where it lies (hands, expeditions, discard piles, deck)
plus the public knowledge of pile draws (``known``). Action ids, card types and
the feature layout are those of :class:`~lostcities_cfr.game.rules.Rules` and
``docs/encoding.md``.
"""

from __future__ import annotations

import bisect
import operator
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game.encoding import feature_blocks, feature_size
from lostcities_cfr.game.rules import COLOR_NAMES, Rules


def expedition_score(rules: Rules, ranks: Sequence[int]) -> int:
    """Score of one expedition given its rank indexes (0 = wager).

    An unstarted expedition scores 0; a started one scores
    ``(sum of face values - expedition_cost) * (1 + wagers)``, plus ``bonus`` once it
    holds at least ``bonus_threshold`` cards.
    """
    if not ranks:
        return 0
    wagers = sum(1 for r in ranks if r == 0)
    total = sum(rules.face_value(r) for r in ranks)
    bonus = rules.bonus if len(ranks) >= rules.bonus_threshold else 0
    return (total - rules.expedition_cost) * (1 + wagers) + bonus


@dataclass
class GameState:
    """One round of Lost Cities.

    Build one with :meth:`new` (a shuffled deal) or :meth:`from_deal` (a given deal);
    then alternate :meth:`legal_actions` and :meth:`apply` until :attr:`is_terminal`.

    Attributes:
        rules: the variant being played.
        hands: per player, the type ids in hand, kept sorted.
        expeditions: ``expeditions[p][c]`` holds the rank indexes player ``p`` played
            in colour ``c``, in play order (wagers first, then rising numbers).
        piles: ``piles[c]`` holds the rank indexes on colour ``c``'s discard pile,
            bottom to top.
        deck: type ids still to draw; ``deck[0]`` is drawn next.
        known: ``known[p][t]`` counts the copies of type ``t`` in ``p``'s hand that
            both players know about because ``p`` took them from a pile.
        turn: decisions (half-turns) made so far.
        discarded_color: the colour discarded to in this turn's card decision, so
            that the draw decision cannot take it back; ``None`` otherwise.
    """

    rules: Rules
    hands: list[list[int]]
    expeditions: list[list[list[int]]]
    piles: list[list[int]]
    deck: list[int]
    known: list[list[int]]
    turn: int = 0
    discarded_color: int | None = None

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def new(cls, rules: Rules, seed: int | None = None) -> GameState:
        """Shuffle the full deck with ``random.Random(seed)`` and deal: player 0 gets the
        first ``hand_size`` cards, player 1 the next ``hand_size``, the rest is the deck."""
        cards = rules.full_deck()
        random.Random(seed).shuffle(cards)
        H = rules.hand_size
        return cls.from_deal(rules, [cards[:H], cards[H : 2 * H]], cards[2 * H :])

    @classmethod
    def from_deal(
        cls, rules: Rules, hands: Sequence[Sequence[int]], deck: Sequence[int]
    ) -> GameState:
        """The state before player 0's first decision, for a given deal.

        Raises:
            ValueError: unless ``hands`` are two hands of ``hand_size`` type ids and
                hands plus deck hold exactly the cards of ``rules.full_deck()``.
        """
        if len(hands) != 2:
            raise ValueError(f"hands must hold 2 hands (one per player), got {len(hands)}")
        for p, hand in enumerate(hands):
            if len(hand) != rules.hand_size:
                raise ValueError(
                    f"hands[{p}] holds {len(hand)} cards; it must hold hand_size={rules.hand_size}"
                )
        cards = [t for hand in hands for t in hand] + list(deck)
        for t in cards:
            if not isinstance(t, int) or not 0 <= t < rules.n_types:
                raise ValueError(
                    f"card {t!r} is not a type id: type ids are ints in 0..{rules.n_types - 1}"
                )
        have, want = Counter(cards), Counter(rules.full_deck())
        for t in range(rules.n_types):
            if have[t] != want[t]:
                raise ValueError(
                    f"the deal holds {have[t]} copies of {rules.card_name(t)} (type id {t}); "
                    f"hands plus deck must hold exactly the {want[t]} of the full deck"
                )
        C, T = rules.n_colors, rules.n_types
        return cls(
            rules=rules,
            hands=[sorted(hand) for hand in hands],
            expeditions=[[[] for _ in range(C)] for _ in range(2)],
            piles=[[] for _ in range(C)],
            deck=list(deck),
            known=[[0] * T for _ in range(2)],
        )

    def clone(self) -> GameState:
        """An independent copy (list copies; much faster than ``copy.deepcopy``)."""
        return GameState(
            rules=self.rules,
            hands=[hand[:] for hand in self.hands],
            expeditions=[[exp[:] for exp in player] for player in self.expeditions],
            piles=[pile[:] for pile in self.piles],
            deck=self.deck[:],
            known=[counts[:] for counts in self.known],
            turn=self.turn,
            discarded_color=self.discarded_color,
        )

    # ---- whose decision ----------------------------------------------------------------------
    @property
    def current_player(self) -> int:
        return (self.turn // 2) % 2

    @property
    def phase(self) -> int:
        """0: the card decision (play or discard); 1: the draw decision."""
        return self.turn % 2

    @property
    def is_terminal(self) -> bool:
        """The round is over once a draw has emptied the deck or ``max_turns`` decisions
        have been made."""
        return not self.deck or self.turn >= self.rules.max_turns

    # ---- legality ----------------------------------------------------------------------------
    def _can_play(self, t: int) -> bool:
        """Whether the player to move may play type ``t``, if they hold it."""
        color, r = self.rules.type_color_rank(t)
        expedition = self.expeditions[self.current_player][color]
        # Expeditions are ascending, so the last card is the highest number (or a wager).
        if not expedition:
            return True
        if r == 0:
            return expedition[-1] == 0
        return expedition[-1] < r

    def legal_actions(self) -> list[int]:
        """The ids of the legal actions, sorted; ``[]`` once the round is over."""
        if self.is_terminal:
            return []
        rules = self.rules
        if self.phase == 0:
            held = sorted(set(self.hands[self.current_player]))
            plays = [rules.play_action(t) for t in held if self._can_play(t)]
            return plays + [rules.discard_action(t) for t in held]
        draws = [rules.draw_deck_action]  # the deck is never empty before the end
        for color, pile in enumerate(self.piles):
            if pile and color != self.discarded_color:
                draws.append(rules.draw_pile_action(color))
        return draws

    def _why_illegal(self, action: int) -> str | None:
        """The reason ``action`` is illegal now, or ``None`` if it is legal."""
        rules, p = self.rules, self.current_player
        T = rules.n_types
        if not 0 <= action < rules.n_actions:
            return f"action ids run from 0 to {rules.n_actions - 1}"
        if self.is_terminal:
            return "the round is over"
        is_card_action = action < 2 * T
        if self.phase == 0 and not is_card_action:
            return "it is the card decision (play or discard a card)"
        if self.phase == 1 and is_card_action:
            return "it is the draw decision (draw from the deck or a discard pile)"
        if is_card_action:
            t = action % T
            if t not in self.hands[p]:
                return f"player {p} does not hold {rules.card_name(t)}"
            if action < T and not self._can_play(t):
                color, r = rules.type_color_rank(t)
                top = rules.card_name(rules.type_id(color, self.expeditions[p][color][-1]))
                rule = (
                    "a wager goes only on an expedition without number cards"
                    if r == 0
                    else f"a number card must be higher than {top}"
                )
                return (
                    f"the {COLOR_NAMES[color]} expedition of player {p} already holds {top}; {rule}"
                )
            return None
        if action == rules.draw_deck_action:
            return None if self.deck else "the deck is empty"
        color = action - 2 * T - 1
        if not self.piles[color]:
            return f"the {COLOR_NAMES[color]} discard pile is empty"
        if color == self.discarded_color:
            return (
                f"player {p} discarded to the {COLOR_NAMES[color]} pile in this turn "
                f"and cannot take it back"
            )
        return None

    # ---- moves -------------------------------------------------------------------------------
    def apply(self, action: int) -> None:
        """Make the current player's decision ``action``, in place.

        Raises:
            IllegalActionError: ``action`` is not legal now (the state is left unchanged).
        """
        try:
            action = operator.index(action)
        except TypeError:
            raise IllegalActionError(f"action {action!r} is not an int action id") from None
        reason = self._why_illegal(action)
        if reason is not None:
            raise IllegalActionError(
                f"{self.rules.action_name(action)} (action {action}) is illegal: {reason}"
            )
        rules, p = self.rules, self.current_player
        T = rules.n_types
        if action < 2 * T:
            t = action % T
            color, r = rules.type_color_rank(t)
            self.hands[p].remove(t)
            # The opponent cannot tell which copy left, so a public copy is used up first.
            self.known[p][t] = max(self.known[p][t] - 1, 0)
            if action < T:
                self.expeditions[p][color].append(r)
                self.discarded_color = None
            else:
                self.piles[color].append(r)
                self.discarded_color = color
        else:
            if action == rules.draw_deck_action:
                t = self.deck.pop(0)
            else:
                color = action - 2 * T - 1
                t = rules.type_id(color, self.piles[color].pop())
                self.known[p][t] += 1
            bisect.insort(self.hands[p], t)
            self.discarded_color = None
        self.turn += 1

    # ---- outcome -----------------------------------------------------------------------------
    def scores(self) -> tuple[int, int]:
        """Each player's total over their expeditions (meaningful at any time)."""
        s0, s1 = (
            sum(expedition_score(self.rules, ranks) for ranks in expeditions)
            for expeditions in self.expeditions
        )
        return s0, s1

    def returns(self) -> tuple[int, int]:
        """The zero-sum utilities ``(s0 - s1, s1 - s0)``."""
        s0, s1 = self.scores()
        return s0 - s1, s1 - s0

    # ---- what a player knows -----------------------------------------------------------------
    def information_state(self, player: int) -> list[float]:
        """The feature vector of ``docs/encoding.md`` as seen by ``player``.

        It depends only on what ``player`` knows: changing the opponent's hidden cards or
        the deck order leaves it unchanged.
        """
        rules = self.rules
        T, L, R = rules.n_types, rules.pile_capacity, rules.n_ranks
        blocks = feature_blocks(rules)
        x = [0.0] * feature_size(rules)

        def add(block: str, index: int, value: float = 1.0) -> None:
            x[blocks[block].start + index] += value

        for t in self.hands[player]:
            add("hand", t)
        for block, owner in (("own_expeditions", player), ("opp_expeditions", 1 - player)):
            for color, ranks in enumerate(self.expeditions[owner]):
                for r in ranks:
                    add(block, rules.type_id(color, r))
        for color, pile in enumerate(self.piles):
            for slot, r in enumerate(pile):
                add("pile_counts", rules.type_id(color, r))
                add("pile_sequence", color * L + slot, (r + 1) / (R + 1))
            if pile:
                add("pile_tops", rules.type_id(color, pile[-1]))
        for t, count in enumerate(self.known[1 - player]):
            add("opp_known", t, count)
        seen = ("hand", "own_expeditions", "opp_expeditions", "pile_counts", "opp_known")
        for t in range(T):
            add("unseen", t, rules.copies(t) - sum(x[blocks[b].start + t] for b in seen))
        dealt = rules.deck_size - 2 * rules.hand_size
        add("deck_fraction", 0, len(self.deck) / dealt)
        add("turn", 0, self.turn / (2 * dealt))
        add("pile_draws", 0, (self.turn // 2 - (dealt - len(self.deck))) / dealt)
        add("phase", self.phase)
        add("to_move", 0, 1.0 if player == self.current_player else 0.0)
        add("seat", 0, 1.0 if player == 0 else 0.0)
        add(
            "discarded_color",
            rules.n_colors if self.discarded_color is None else self.discarded_color,
        )
        return x

    # ---- for people --------------------------------------------------------------------------
    def __str__(self) -> str:
        rules, p = self.rules, self.current_player

        def cards(types: Sequence[int]) -> str:
            return " ".join(rules.card_name(t) for t in types) or "-"

        def row(color: int, ranks: Sequence[int]) -> str:
            return cards([rules.type_id(color, r) for r in ranks])

        s0, s1 = self.scores()
        if self.is_terminal:
            status = f"Round over after {self.turn} decisions: player 0 {s0}, player 1 {s1}."
        else:
            decision = "card decision (play or discard)" if self.phase == 0 else "draw decision"
            status = (
                f"Half-turn {self.turn}: player {p} to move, {decision}. "
                f"Scores so far: player 0 {s0}, player 1 {s1}."
            )
        table = [("", "player 0", "discard pile (top last)", "player 1")]
        for color in range(rules.n_colors):
            table.append(
                (
                    COLOR_NAMES[color],
                    row(color, self.expeditions[0][color]),
                    row(color, self.piles[color]),
                    row(color, self.expeditions[1][color]),
                )
            )
        widths = [max(len(line[i]) for line in table) for i in range(4)]
        lines = [status, f"Deck: {len(self.deck)} cards."]
        if self.discarded_color is not None:
            lines.append(f"Discarded to the {COLOR_NAMES[self.discarded_color]} pile this turn.")
        lines += [
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in table
        ]
        if not self.is_terminal:
            opp_known = [t for t in range(rules.n_types) for _ in range(self.known[1 - p][t])]
            lines.append(f"Player {p}'s view. Hand: {cards(self.hands[p])}")
            lines.append(f"Known in player {1 - p}'s hand (taken from piles): {cards(opp_known)}")
        return "\n".join(lines)
