"""Positions for the search tests: states reached by random play."""

import random

from lostcities_cfr.game import GameState, Rules

CLASSIC = Rules.classic()


def random_positions(count: int, seed: int, rules: Rules = CLASSIC) -> list[GameState]:
    """``count`` unfinished states after 0..80 random decisions (random play draws from the
    piles often, so many opponents hold known cards)."""
    rng = random.Random(seed)
    positions: list[GameState] = []
    while len(positions) < count:
        state = GameState.new(rules, seed=rng.randrange(2**31))
        for _ in range(rng.randrange(0, 80)):
            if state.is_terminal:
                break
            state.apply(rng.choice(state.legal_actions()))
        if not state.is_terminal:
            positions.append(state)
    return positions
