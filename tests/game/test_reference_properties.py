"""Invariants of the reference engine over random games (hypothesis draws the seeds)."""

import random
from collections import Counter
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game import Rules, feature_blocks
from lostcities_cfr.game.reference import GameState

PRESETS = {"classic": Rules.classic(), "six_colors": Rules.six_colors(), "tiny": Rules.tiny()}
# The blocks that count physical cards of each type; together they hold every card once.
COUNT_BLOCKS = ("hand", "own_expeditions", "opp_expeditions", "pile_counts", "opp_known", "unseen")
seeds = st.integers(min_value=0, max_value=2**32 - 1)
presets = st.sampled_from(sorted(PRESETS))


def random_game(rules: Rules, seed: int):
    """Yield every state of one game of uniformly random legal play, the first and last included."""
    state, rng = GameState.new(rules, seed=seed), random.Random(seed)
    yield state
    while not state.is_terminal:
        state.apply(rng.choice(state.legal_actions()))
        yield state


def cards_in_play(state: GameState) -> Counter:
    rules = state.rules
    cards = Counter(state.hands[0] + state.hands[1] + state.deck)
    for color, pile in enumerate(state.piles):
        cards.update(rules.type_id(color, r) for r in pile)
    for expeditions in state.expeditions:
        for color, ranks in enumerate(expeditions):
            cards.update(rules.type_id(color, r) for r in ranks)
    return cards


@settings(max_examples=50)
@given(preset=presets, seed=seeds)
def test_cards_are_conserved(preset, seed):
    rules = PRESETS[preset]
    full_deck = Counter(rules.full_deck())
    for state in random_game(rules, seed):
        assert cards_in_play(state) == full_deck


@settings(max_examples=50)
@given(preset=presets, seed=seeds)
def test_expeditions_hold_wagers_then_strictly_rising_numbers(preset, seed):
    for state in random_game(PRESETS[preset], seed):
        for expeditions in state.expeditions:
            for ranks in expeditions:
                for lower, higher in pairwise(ranks):
                    assert lower < higher or lower == higher == 0


@settings(max_examples=20)
@given(preset=presets, seed=seeds)
def test_legal_actions_are_exactly_the_actions_apply_accepts(preset, seed):
    rules = PRESETS[preset]
    for state in random_game(rules, seed):
        accepted, trial = [], state.clone()
        for action in range(rules.n_actions):
            try:
                trial.apply(action)
            except IllegalActionError:
                continue  # a rejected action leaves the trial state as it was
            accepted.append(action)
            trial = state.clone()
        assert state.legal_actions() == accepted
        assert trial == state


@settings(max_examples=50)
@given(seed=seeds)
def test_random_classic_games_end_well_before_max_turns(seed):
    *_, last = random_game(Rules.classic(), seed)
    assert last.turn < 2000
    assert not last.deck


@settings(max_examples=50)
@given(preset=presets, seed=seeds)
def test_hands_are_full_after_every_full_turn_and_returns_are_the_score_difference(preset, seed):
    rules = PRESETS[preset]
    for state in random_game(rules, seed):
        if state.phase == 0:
            assert [len(hand) for hand in state.hands] == [rules.hand_size] * 2
        else:
            assert len(state.hands[state.current_player]) == rules.hand_size - 1
        assert all(hand == sorted(hand) for hand in state.hands)
        s0, s1 = state.scores()
        assert state.returns() == (s0 - s1, s1 - s0)


@settings(max_examples=20)
@given(preset=presets, seed=seeds)
def test_known_cards_never_exceed_the_hand_and_the_feature_counts_add_up(preset, seed):
    rules = PRESETS[preset]
    T, blocks = rules.n_types, feature_blocks(rules)
    for state in random_game(rules, seed):
        for p in (0, 1):
            for t in range(T):
                assert 0 <= state.known[p][t] <= state.hands[p].count(t)
            x = state.information_state(p)
            per_type = [x[blocks[name]] for name in COUNT_BLOCKS]
            for t in range(T):
                assert sum(block[t] for block in per_type) == rules.copies(t)
            unseen = x[blocks["unseen"]]
            assert min(unseen) >= 0
            hidden = len(state.hands[1 - p]) - sum(state.known[1 - p])
            assert sum(unseen) == len(state.deck) + hidden
