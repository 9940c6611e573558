"""What the page shows, as JSON: the board, the legal moves and an agent's reasoning.

Plain dicts of ints, floats and strings built from reference-engine states, shared by the
person's games (``matches.py``) and the replays (``replays.py``). Card and move names are
the terminal game's (both read ``game/text.py``), scores are the rules page's (``docs/rules.md``).
"""

from __future__ import annotations

import math

import torch

from lostcities_cfr.game.reference import GameState, expedition_score
from lostcities_cfr.game.rules import COLOR_NAMES, Rules
from lostcities_cfr.game.text import explain_expedition, move_label

TOP_ACTIONS = 5  # actions shown of an agent's reasoning (the chosen one is always among them)


def card(rules: Rules, t: int) -> dict:
    """``{"name": "R7", "color": "red"}``."""
    return {"name": rules.card_name(t), "color": COLOR_NAMES[rules.type_color_rank(t)[0]]}


def board(state: GameState, bottom: int, show_both_hands: bool) -> dict:
    """The table with player ``bottom`` at the bottom: expeditions with their running
    scores, discard piles (bottom first), the deck count, and the hands: ``bottom``'s, and
    the other's too with ``show_both_hands`` (a replay), else only its size and its cards
    known from pile draws (what ``bottom`` may know)."""
    rules = state.rules

    def cards(color: int, ranks: list[int]) -> list[dict]:
        return [card(rules, rules.type_id(color, r)) for r in ranks]

    def player(seat: int, hand_shown: bool) -> dict:
        expeditions = state.expeditions[seat]
        known = [t for t in range(rules.n_types) for _ in range(state.known[seat][t])]
        return {
            "seat": seat,
            "expeditions": [cards(c, ranks) for c, ranks in enumerate(expeditions)],
            "scores": [expedition_score(rules, ranks) for ranks in expeditions],
            "total": state.scores()[seat],
            "hand": [card(rules, t) for t in state.hands[seat]] if hand_shown else None,
            "hand_size": len(state.hands[seat]),
            "known": [card(rules, t) for t in known],
        }

    return {
        "colors": list(COLOR_NAMES[: rules.n_colors]),
        "top": player(1 - bottom, show_both_hands),
        "bottom": player(bottom, True),
        "piles": [cards(c, ranks) for c, ranks in enumerate(state.piles)],
        "deck": len(state.deck),
        "turn": state.turn,
        "to_move": None if state.is_terminal else state.current_player,
        "phase": None if state.is_terminal else ("card" if state.phase == 0 else "draw"),
    }


def move_text(state: GameState, action: int) -> str:
    """``play R9``, ``discard R9``, ``draw deck``, ``draw red pile (R3)``: a legal action in
    ``state``, before it is applied."""
    return " ".join(move_label(state, action))


def moves(state: GameState) -> list[dict]:
    """The legal actions: ``{"action", "group", "label"}`` in action-id order."""
    return [
        dict(zip(("group", "label"), move_label(state, action), strict=True), action=action)
        for action in state.legal_actions()
    ]


def reasoning(
    state: GameState, reasons: dict[str, torch.Tensor], chosen: int, explained: bool
) -> dict:
    """An agent's decision in ``state``: the action ``chosen`` and its reasoning (one row of
    ``explain``: label -> [A]) over the legal actions, most probable first.

    Args:
        explained: whether the agent gave its reasoning (``False``: ``"probability"`` is the
            one-hot stand-in of :func:`~lostcities_cfr.agents.base.explain_actions`).
    """
    legal = state.legal_actions()
    values = {label: row.tolist() for label, row in reasons.items()}
    ranked = sorted(legal, key=lambda a: -values["probability"][a])
    shown = ranked[:TOP_ACTIONS] + ([chosen] if chosen not in ranked[:TOP_ACTIONS] else [])
    return {
        "player": state.current_player,
        "action": chosen,
        "text": move_text(state, chosen),
        "explained": explained,
        "labels": list(values),
        "top": [
            {
                "action": action,
                "text": move_text(state, action),
                "chosen": action == chosen,
                **{label: _finite(row[action]) for label, row in values.items()},
            }
            for action in shown
        ],
        "legal": len(legal),
    }


def _finite(value: float) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return value if math.isfinite(value) else None


def round_summary(state: GameState) -> list[dict]:
    """Per seat, its score and every expedition's explained (``R* R4 R5: (9 - 20) x 2 = -22``)."""
    rules = state.rules
    return [
        {
            "seat": seat,
            "score": state.scores()[seat],
            "expeditions": [
                f"{COLOR_NAMES[color]}: {explain_expedition(rules, color, ranks)}"
                for color, ranks in enumerate(state.expeditions[seat])
            ],
        }
        for seat in (0, 1)
    ]
