"""The reference engine on hand-built positions: dealing, legality, errors, the end of the
round, public knowledge of pile draws, the information state and the text board."""

import dataclasses
import random

import pytest
from hidden_cards import resample_hidden

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game import Rules, feature_blocks
from lostcities_cfr.game.reference import GameState

CLASSIC = Rules.classic()
T = CLASSIC.n_types


def ids(names: str, rules: Rules = CLASSIC) -> list[int]:
    """Type ids of cards written as ``rules.card_name`` writes them: "R* R3 G10"."""
    by_name = {rules.card_name(t): t for t in range(rules.n_types)}
    return [by_name[name] for name in names.split()]


def deal(hand0: str, hand1: str, deck_top: str = "", rules: Rules = CLASSIC) -> GameState:
    """A deal with the given hands; the deck starts with ``deck_top``, then the other cards."""
    rest = rules.full_deck()
    for t in ids(f"{hand0} {hand1} {deck_top}", rules):
        rest.remove(t)
    return GameState.from_deal(
        rules, [ids(hand0, rules), ids(hand1, rules)], ids(deck_top, rules) + rest
    )


def play(name: str) -> int:
    return CLASSIC.play_action(ids(name)[0])


def discard(name: str) -> int:
    return CLASSIC.discard_action(ids(name)[0])


def draw_pile(letter: str) -> int:
    return CLASSIC.draw_pile_action("RGBWY".index(letter))


DRAW_DECK = CLASSIC.draw_deck_action
HAND0 = "R* R3 R5 R9 G2 G4 B* B2"
HAND1 = "R* R7 G5 G6 W2 W3 Y2 Y3"


def opening(*actions: int) -> GameState:
    """The standard test deal (deck starting Y4 Y5 Y6) after ``actions``."""
    state = deal(HAND0, HAND1, deck_top="Y4 Y5 Y6")
    for action in actions:
        state.apply(action)
    return state


# ---- dealing -----------------------------------------------------------------------------------
def test_new_deals_the_seeded_shuffle_in_order():
    rules = CLASSIC
    cards = rules.full_deck()
    random.Random(7).shuffle(cards)
    state = GameState.new(rules, seed=7)
    assert state.hands == [sorted(cards[:8]), sorted(cards[8:16])]
    assert state.deck == cards[16:]
    assert (state.turn, state.current_player, state.phase) == (0, 0, 0)
    assert state.discarded_color is None


def test_new_is_reproducible_per_seed_and_differs_across_seeds():
    assert GameState.new(CLASSIC, seed=3) == GameState.new(CLASSIC, seed=3)
    assert GameState.new(CLASSIC, seed=3) != GameState.new(CLASSIC, seed=4)


def test_from_deal_sorts_hands_and_keeps_the_deck_order():
    rest = CLASSIC.full_deck()
    for t in ids(f"{HAND0} {HAND1}"):
        rest.remove(t)
    rest.reverse()
    state = GameState.from_deal(CLASSIC, [ids(HAND0)[::-1], ids(HAND1)], rest)
    assert state.hands[0] == ids(HAND0)
    assert state.deck == rest


@pytest.mark.parametrize(
    ("hands", "deck", "message"),
    [
        ([ids(HAND0)], [], r"2 hands"),
        ([ids(HAND0)[:7], ids(HAND1)], [], r"hands\[0\] holds 7 cards.*hand_size=8"),
        ([ids(HAND0), [*ids(HAND1)[:7], 50]], [], r"card 50 is not a type id"),
        ([ids(HAND0), [*ids(HAND1)[:7], -1]], [], r"card -1 is not a type id"),
        ([ids(HAND0), ids(HAND1)], ids("R3"), r"2 copies of R3 \(type id 2\).*exactly the 1"),
        ([ids(HAND0), ids(HAND1)], ids("R*"), r"4 copies of R\* \(type id 0\).*exactly the 3"),
    ],
    ids=["one_hand", "short_hand", "id_too_high", "negative_id", "duplicate", "four_wagers"],
)
def test_from_deal_rejects_a_bad_deal_naming_the_problem(hands, deck, message):
    rest = CLASSIC.full_deck()
    for t in ids(f"{HAND0} {HAND1}"):
        rest.remove(t)
    with pytest.raises(ValueError, match=message):
        GameState.from_deal(CLASSIC, hands, rest + deck)


def test_from_deal_rejects_a_missing_card():
    deck = CLASSIC.full_deck()
    for t in ids(f"{HAND0} {HAND1} Y10"):
        deck.remove(t)
    with pytest.raises(ValueError, match=r"0 copies of Y10"):
        GameState.from_deal(CLASSIC, [ids(HAND0), ids(HAND1)], deck)


def test_clone_is_equal_and_independent():
    state = opening(play("R5"))
    copy = state.clone()
    assert copy == state
    copy.apply(DRAW_DECK)
    assert copy != state
    assert state.hands[0] == ids("R* R3 R9 G2 G4 B* B2")
    assert state.turn == 1


# ---- legality ----------------------------------------------------------------------------------
def test_card_decision_offers_every_held_card_to_discard_and_the_playable_ones_to_play():
    legal = opening().legal_actions()
    assert legal == sorted([play(c) for c in HAND0.split()] + [discard(c) for c in HAND0.split()])


def test_wager_after_a_number_card_is_illegal_but_a_gap_is_allowed():
    # Player 0 opens red with R5; player 1 discards W2; player 0 is back to the card decision.
    state = opening(play("R5"), DRAW_DECK, discard("W2"), DRAW_DECK)
    legal = state.legal_actions()
    assert play("R9") in legal  # R6..R8 skipped
    assert play("R3") not in legal
    assert play("R*") not in legal
    assert discard("R3") in legal and discard("R*") in legal


def test_wagers_may_follow_wagers():
    state = deal("R* R* R3 R5 G2 G4 B* B2", HAND1)
    for action in (play("R*"), DRAW_DECK, discard("W2"), DRAW_DECK):
        state.apply(action)
    assert state.expeditions[0][0] == [0]
    assert play("R*") in state.legal_actions()
    assert play("R3") in state.legal_actions()


def test_player_cannot_draw_back_from_the_pile_discarded_to_this_turn():
    state = opening(discard("G2"))
    assert state.discarded_color == 1
    assert state.legal_actions() == [DRAW_DECK]


def test_player_may_draw_from_another_pile():
    state = opening(discard("G2"), DRAW_DECK, discard("W2"))
    assert state.legal_actions() == [DRAW_DECK, draw_pile("G")]


def test_draw_decision_offers_no_card_actions():
    state = opening(discard("G2"), DRAW_DECK, play("W2"))
    assert state.phase == 1
    assert all(action >= 2 * T for action in state.legal_actions())
    assert state.legal_actions() == [DRAW_DECK, draw_pile("G")]


@pytest.mark.parametrize(
    ("before", "action", "message"),
    [
        ((), play("R7"), r"play R7 \(action 6\) is illegal: player 0 does not hold R7"),
        ((), discard("Y2"), r"discard Y2 \(action 91\) is illegal: player 0 does not hold Y2"),
        ((), DRAW_DECK, r"draw deck \(action 100\) is illegal: it is the card decision"),
        ((play("R5"),), discard("R3"), r"discard R3 \(action 52\) is illegal: it is the draw"),
        (
            (play("R5"), DRAW_DECK, discard("W2"), DRAW_DECK),
            play("R3"),
            r"play R3 \(action 2\) is illegal: the red expedition of player 0 already holds R5; "
            r"a number card must be higher than R5",
        ),
        (
            (play("R5"), DRAW_DECK, discard("W2"), DRAW_DECK),
            play("R*"),
            r"holds R5; a wager goes only on an expedition without number cards",
        ),
        ((discard("G2"),), draw_pile("G"), r"draw pile G .* discarded to the green pile"),
        ((discard("G2"),), draw_pile("B"), r"draw pile B .* the blue discard pile is empty"),
        ((), 106, r"action 106 .* is illegal: action ids run from 0 to 105"),
        ((), -1, r"is illegal: action ids run from 0 to 105"),
        ((), "3", r"'3' is not an int action id"),
    ],
)
def test_illegal_action_raises_naming_it_and_leaves_the_state_unchanged(before, action, message):
    state = opening(*before)
    snapshot = state.clone()
    with pytest.raises(IllegalActionError, match=message):
        state.apply(action)
    assert state == snapshot


def test_apply_accepts_numpy_like_integers():
    class Index:
        def __index__(self) -> int:
            return play("R5")

    state = opening()
    state.apply(Index())
    assert state.expeditions[0][0] == [4]


# ---- moves and the end of the round ------------------------------------------------------------
def test_turn_passes_to_the_other_player_after_the_draw():
    state = opening(play("R5"))
    assert (state.turn, state.current_player, state.phase) == (1, 0, 1)
    state.apply(DRAW_DECK)
    assert (state.turn, state.current_player, state.phase) == (2, 1, 0)
    assert state.hands[0] == ids("R* R3 R9 G2 G4 B* B2 Y4")
    assert state.deck[0] == ids("Y5")[0]


def test_round_ends_when_a_draw_empties_the_deck():
    tiny = Rules.tiny()
    state = deal("R* R2", "G* G2", deck_top="R3 G3", rules=tiny)
    state.apply(tiny.discard_action(ids("R2", tiny)[0]))
    state.apply(tiny.draw_deck_action)
    state.apply(tiny.discard_action(ids("G2", tiny)[0]))
    assert not state.is_terminal
    state.apply(tiny.draw_deck_action)
    assert state.is_terminal
    assert state.turn == 4
    assert state.legal_actions() == []
    with pytest.raises(IllegalActionError, match="the round is over"):
        state.apply(tiny.draw_pile_action(0))


def test_max_turns_ends_the_round_with_cards_left_in_the_deck():
    rules = dataclasses.replace(CLASSIC, max_turns=10)
    state, rng = GameState.new(rules, seed=0), random.Random(0)
    for _ in range(10):
        assert not state.is_terminal
        state.apply(rng.choice(state.legal_actions()))
    assert state.is_terminal
    assert len(state.deck) > 0
    assert state.legal_actions() == []


def test_scores_and_returns_count_the_expeditions():
    state = opening(play("R5"), DRAW_DECK, play("W2"), DRAW_DECK, play("R9"))
    assert state.scores() == (5 + 9 - 20, 2 - 20)
    assert state.returns() == (12, -12)


# ---- public knowledge of pile draws ------------------------------------------------------------
def test_known_cards_track_a_wager_drawn_from_a_pile_until_a_copy_leaves():
    red_wager = ids("R*")[0]
    state = opening(discard("R*"), DRAW_DECK, discard("W2"), draw_pile("R"))
    # Player 1 now holds two red wagers, one of them public.
    assert state.hands[1].count(red_wager) == 2
    assert state.known[1][red_wager] == 1
    state.apply(discard("G2"))
    state.apply(DRAW_DECK)
    state.apply(play("R*"))  # either copy: the public one is used up
    assert state.known[1][red_wager] == 0
    state.apply(DRAW_DECK)
    state.apply(discard("G4"))
    state.apply(DRAW_DECK)
    state.apply(discard("R*"))
    assert state.known[1][red_wager] == 0  # never below zero


def test_known_cards_track_a_number_card_drawn_from_a_pile():
    w2 = ids("W2")[0]
    state = opening(discard("G2"), DRAW_DECK, discard("W2"), DRAW_DECK, discard("B2"))
    state.apply(draw_pile("W"))
    assert state.known == [[int(t == w2) for t in range(T)], [0] * T]
    # three turns done, two of them drew from the deck: one pile draw, for both players
    assert features(state, 1)["pile_draws"] == [1 / 44]
    assert features(state, 0)["turn"] == [6 / 88]
    state.apply(discard("R*"))
    state.apply(DRAW_DECK)
    state.apply(play("W2"))
    assert state.known[0][w2] == 0


# ---- the information state ---------------------------------------------------------------------
def features(state: GameState, player: int) -> dict[str, list[float]]:
    x = state.information_state(player)
    return {name: x[block] for name, block in feature_blocks(state.rules).items()}


def counts(names: str) -> list[float]:
    out = [0.0] * T
    for t in ids(names):
        out[t] += 1.0
    return out


def test_information_state_blocks_on_a_draw_decision():
    # Player 0 opened R5 and drew Y4; player 1 discarded W2 and drew Y5; player 0 discards G2.
    state = opening(play("R5"), DRAW_DECK, discard("W2"), DRAW_DECK, discard("G2"))
    f = features(state, 0)
    assert f["hand"] == counts("R* R3 R9 G4 B* B2 Y4")
    assert f["own_expeditions"] == counts("R5")
    assert f["opp_expeditions"] == [0.0] * T
    assert f["pile_counts"] == counts("W2 G2")
    assert f["pile_tops"] == counts("W2 G2")
    L = CLASSIC.pile_capacity
    sequence = [0.0] * (5 * L)
    sequence[1 * L] = sequence[3 * L] = 2 / 10  # rank index 1 on the green and white piles
    assert f["pile_sequence"] == sequence
    assert f["opp_known"] == [0.0] * T
    unseen = [float(CLASSIC.copies(t)) for t in range(T)]
    for t in ids("R* R3 R9 G4 B* B2 Y4 R5 W2 G2"):
        unseen[t] -= 1
    assert f["unseen"] == unseen
    assert f["deck_fraction"] == [42 / 44]
    assert f["turn"] == [5 / 88]  # five decisions played, two rounds of 44 deck cards
    assert f["pile_draws"] == [0.0]
    assert f["phase"] == [0.0, 1.0]
    assert f["to_move"] == [1.0]
    assert f["discarded_color"] == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    g = features(state, 1)
    assert (f["seat"], g["seat"]) == ([1.0], [0.0])
    assert g["hand"] == counts("R* R7 G5 G6 W3 Y2 Y3 Y5")
    assert g["opp_expeditions"] == counts("R5")
    assert g["to_move"] == [0.0]
    assert g["discarded_color"] == f["discarded_color"]


def test_information_state_shows_the_opponents_pile_draw():
    state = opening(play("R5"), DRAW_DECK, discard("W2"), DRAW_DECK, discard("G2"), draw_pile("W"))
    f = features(state, 1)
    assert f["opp_known"] == counts("W2")
    assert f["unseen"][ids("W2")[0]] == 0.0
    assert f["pile_counts"] == counts("G2")
    assert f["pile_tops"] == counts("G2")
    assert sum(f["pile_sequence"]) == pytest.approx(0.2)
    assert f["phase"] == [1.0, 0.0]
    assert f["to_move"] == [1.0]
    assert f["discarded_color"] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("rules", [CLASSIC, Rules.tiny()], ids=["classic", "tiny"])
def test_information_state_ignores_hidden_cards(rules):
    rng = random.Random(0)
    changed = 0
    for seed in range(5):
        state = GameState.new(rules, seed=seed)
        while not state.is_terminal:
            for viewer in (0, 1):
                other = resample_hidden(state, viewer, rng)
                changed += other != state
                assert other.information_state(viewer) == state.information_state(viewer)
            state.apply(rng.choice(state.legal_actions()))
    assert changed > 0


# ---- for people --------------------------------------------------------------------------------
def test_str_draws_the_board_and_the_hand_of_the_player_to_move():
    text = str(opening(play("R5"), DRAW_DECK, discard("W2")))
    assert "player 1 to move, draw decision" in text
    assert "Deck: 43 cards." in text
    assert "Discarded to the white pile this turn." in text
    assert "Player 1's view. Hand: R* R7 G5 G6 W3 Y2 Y3" in text
    red_row = next(line for line in text.splitlines() if line.startswith("red"))
    assert "R5" in red_row


def test_str_of_a_finished_round_gives_the_scores():
    state, rng = GameState.new(Rules.tiny(), seed=0), random.Random(0)
    while not state.is_terminal:
        state.apply(rng.choice(state.legal_actions()))
    s0, s1 = state.scores()
    assert f"Round over after {state.turn} decisions: player 0 {s0}, player 1 {s1}." in str(state)
