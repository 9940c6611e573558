"""The game layer: rules, the reference engine (one game, plain Python), the
batched engine (B games as tensors) and the information-state encoding.

Knows nothing of networks, CFR or Lightning.
"""

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game.batched import GameBatch, expedition_scores
from lostcities_cfr.game.encoding import feature_blocks, feature_size
from lostcities_cfr.game.reference import GameState, expedition_score
from lostcities_cfr.game.rules import Rules

__all__ = [
    "GameBatch",
    "GameState",
    "IllegalActionError",
    "Rules",
    "expedition_score",
    "expedition_scores",
    "feature_blocks",
    "feature_size",
]
