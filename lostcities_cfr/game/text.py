"""Lost Cities in words: the board as a player sees it, moves, and how an expedition scored.

The terminal game (``python -m lostcities_cfr play``) and the web page (``serve``) show the
same names for cards, moves and scores; both read them from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from lostcities_cfr.game.reference import GameState, expedition_score
from lostcities_cfr.game.rules import COLOR_NAMES, Rules


def explain_expedition(rules: Rules, color: int, ranks: Sequence[int]) -> str:
    """How one expedition scored, e.g. ``R* R4 R5 R9: (18 - 20) x 2 = -4``."""
    if not ranks:
        return "not started: 0"
    cards = " ".join(rules.card_name(rules.type_id(color, r)) for r in ranks)
    total = sum(rules.face_value(r) for r in ranks)
    wagers = sum(1 for r in ranks if r == 0)
    text = f"{cards}: ({total} - {rules.expedition_cost})"
    if wagers:
        text += f" x {1 + wagers}"
    if len(ranks) >= rules.bonus_threshold:
        text += f" + {rules.bonus} bonus"
    return f"{text} = {expedition_score(rules, ranks)}"


def render_board(state: GameState, you: int, round_label: str) -> str:
    """The table as player ``you`` sees it: expeditions, piles, deck and own hand."""
    rules = state.rules
    them = 1 - you

    def row(color: int, ranks: Sequence[int]) -> str:
        return " ".join(rules.card_name(rules.type_id(color, r)) for r in ranks) or "-"

    scores = state.scores()
    table = [("", "opponent", "discard pile (top last)", "you")]
    for color in range(rules.n_colors):
        table.append(
            (
                COLOR_NAMES[color],
                row(color, state.expeditions[them][color]),
                row(color, state.piles[color]),
                row(color, state.expeditions[you][color]),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    known = [t for t in range(rules.n_types) for _ in range(state.known[them][t])]
    lines = [
        f"{round_label} | deck: {len(state.deck)} cards | "
        f"scores so far: you {scores[you]}, opponent {scores[them]}",
        "",
        *(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            for line in table
        ),
        "",
        f"Opponent's hand: {rules.hand_size} cards"
        + (f", known from pile draws: {' '.join(map(rules.card_name, known))}" if known else ""),
        f"Your hand: {' '.join(rules.card_name(t) for t in state.hands[you])}",
    ]
    return "\n".join(lines)


def move_label(state: GameState, action: int) -> tuple[str, str]:
    """A legal action as (group, label): ``("play", "R9")``, ``("discard", "R9")``,
    ``("draw", "deck")``, ``("draw", "red pile (R3)")``."""
    rules = state.rules
    T = rules.n_types
    if action < T:
        return "play", rules.card_name(action)
    if action < 2 * T:
        return "discard", rules.card_name(action - T)
    if action == rules.draw_deck_action:
        return "draw", "deck"
    color = action - 2 * T - 1
    top = rules.card_name(rules.type_id(color, state.piles[color][-1]))
    return "draw", f"{COLOR_NAMES[color]} pile ({top})"


def describe_moves(state: GameState) -> str:
    """The legal moves, numbered from 1 in the order of ``state.legal_actions()``."""
    groups: dict[str, list[str]] = {}
    for number, action in enumerate(state.legal_actions(), start=1):
        group, label = move_label(state, action)
        groups.setdefault(group, []).append(f"{number}) {label}")
    return "\n".join(f"{group + ':':9}{'   '.join(moves)}" for group, moves in groups.items())


def describe_agent_move(state: GameState, action: int) -> str:
    """What the agent just did, in words, before ``action`` is applied to ``state``."""
    rules = state.rules
    T = rules.n_types
    if action < T:
        return f"Opponent plays {rules.card_name(action)}."
    if action < 2 * T:
        return f"Opponent discards {rules.card_name(action - T)}."
    if action == rules.draw_deck_action:
        return "Opponent draws from the deck."
    color = action - 2 * T - 1
    top = rules.card_name(rules.type_id(color, state.piles[color][-1]))
    return f"Opponent takes {top} from the {COLOR_NAMES[color]} pile."
