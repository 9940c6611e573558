"""Positions for the search tests: states reached by random play, and the same states with
what the player to move cannot see dealt again."""

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


def reshuffle_hidden(state: GameState, rng: random.Random) -> GameState:
    """``state`` with the opponent's hidden hand cards and the deck shuffled together and
    dealt again: a state the player to move cannot tell from ``state``."""
    other = state.clone()
    them = 1 - other.current_player
    hidden = list(other.hands[them])
    known = [t for t, n in enumerate(other.known[them]) for _ in range(n)]
    for t in known:
        hidden.remove(t)
    pool = hidden + other.deck
    rng.shuffle(pool)
    other.hands[them] = sorted(known + pool[: len(hidden)])
    other.deck = pool[len(hidden) :]
    return other
