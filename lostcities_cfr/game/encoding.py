"""Layout of the information-state feature vector (``docs/encoding.md``).

Both engines build their features block by block in the order of
:func:`feature_blocks`; sharing this one table keeps them in step.
"""

from __future__ import annotations

from lostcities_cfr.game.rules import Rules

BLOCK_ORDER = (
    "hand",
    "own_expeditions",
    "opp_expeditions",
    "pile_counts",
    "pile_tops",
    "pile_sequence",
    "opp_known",
    "unseen",
    "deck_fraction",
    "phase",
    "to_move",
    "seat",
    "discarded_color",
)


def feature_blocks(rules: Rules) -> dict[str, slice]:
    """Name -> slice of each block in the feature vector."""
    T, C, L = rules.n_types, rules.n_colors, rules.pile_capacity
    sizes = {
        "hand": T,
        "own_expeditions": T,
        "opp_expeditions": T,
        "pile_counts": T,
        "pile_tops": T,
        "pile_sequence": C * L,
        "opp_known": T,
        "unseen": T,
        "deck_fraction": 1,
        "phase": 2,
        "to_move": 1,
        "seat": 1,
        "discarded_color": C + 1,
    }
    blocks, start = {}, 0
    for name in BLOCK_ORDER:
        blocks[name] = slice(start, start + sizes[name])
        start += sizes[name]
    return blocks


def feature_size(rules: Rules) -> int:
    """F = 7T + C*L + C + 6 (421 for classic rules)."""
    return feature_blocks(rules)["discarded_color"].stop
