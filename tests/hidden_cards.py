"""A state dealt again where one player cannot see it: shared by the engine's
information-state tests and the search's hidden-information tests."""

import random

from lostcities_cfr.game import GameState


def resample_hidden(state: GameState, viewer: int, rng: random.Random) -> GameState:
    """Same state for ``viewer``: the opponent's unknown cards and the deck reshuffled
    together and dealt again (cards ``viewer`` saw the opponent take stay in its hand)."""
    other = state.clone()
    opp = 1 - viewer
    known = [t for t in range(state.rules.n_types) for _ in range(state.known[opp][t])]
    hidden = list(state.hands[opp])
    for t in known:
        hidden.remove(t)
    pool = hidden + state.deck
    rng.shuffle(pool)
    other.hands[opp] = sorted(known + pool[: len(hidden)])
    other.deck = pool[len(hidden) :]
    return other
