"""Layout of the information-state feature vector (``docs/encoding.md``).

Both engines build their features block by block in the order of
:func:`feature_blocks`; sharing this one table keeps them in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lostcities_cfr.game.rules import Rules

if TYPE_CHECKING:
    from lostcities_cfr.game.batched import GameBatch

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


def history_feature_size(rules: Rules) -> int:
    """H = F + 2T: the player to move's features, the opponent's hand and the deck's contents."""
    return feature_size(rules) + 2 * rules.n_types


def encode_history(batch: GameBatch) -> torch.Tensor:
    """[B, H] float32 features of the whole state, for a history value network.

    The information state of the player to move (:meth:`GameBatch.encode`), then the
    opponent's hand (copies per type) and the deck's contents (copies per type, in no
    order): everything but the deck's order, which no player may condition on.
    """
    rules = batch.rules
    blocks = feature_blocks(rules)
    features = batch.encode()  # [B, F]
    opponent = (1 - batch.current_player).view(-1, 1, 1).expand(-1, 1, rules.n_types)
    opponent_hand = batch.hands.gather(1, opponent).squeeze(1).float()  # [B, T]
    # unseen = deck + the opponent's hand - its public copies
    deck = features[:, blocks["unseen"]] - opponent_hand + features[:, blocks["opp_known"]]
    return torch.cat([features, opponent_hand, deck], dim=1)
