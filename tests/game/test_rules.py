"""The rules configuration: preset sizes, validation, derived ids and the scoring of the rules page."""

import pytest

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.game.reference import expedition_score


@pytest.mark.parametrize(
    ("rules", "deck_size", "n_types", "n_actions", "n_features"),
    [
        (Rules.classic(), 60, 50, 106, 423),
        (Rules.six_colors(), 72, 60, 127, 506),
        (Rules.tiny(), 6, 6, 15, 58),
    ],
    ids=["classic", "six_colors", "tiny"],
)
def test_presets_have_the_documented_sizes(rules, deck_size, n_types, n_actions, n_features):
    assert rules.deck_size == deck_size
    assert len(rules.full_deck()) == deck_size
    assert rules.n_types == n_types
    assert rules.n_actions == n_actions
    assert feature_size(rules) == n_features


def test_presets_are_found_by_name_and_name_themselves():
    assert Rules.presets() == ("classic", "six-colors", "tiny")
    assert Rules.preset("six-colors") == Rules.six_colors()
    for name in Rules.presets():
        assert Rules.preset(name).preset_name() == name
    assert Rules(n_colors=4).preset_name() == "custom"


def test_unknown_preset_raises_config_error_naming_the_value_and_the_choices():
    with pytest.raises(ConfigError, match=r"'six'.*'classic', 'six-colors', 'tiny'"):
        Rules.preset("six")


def test_tiny_deals_two_cards_each_and_leaves_two_in_the_deck():
    rules = Rules.tiny()
    assert rules.deck_size - 2 * rules.hand_size == 2
    assert rules.max_turns == 8


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n_colors", 0),
        ("n_colors", 9),
        ("n_ranks", 0),
        ("n_ranks", 21),
        ("min_rank", -1),
        ("n_wagers", -1),
        ("n_wagers", 6),
        ("hand_size", 0),
        ("hand_size", 30),  # 2 * 30 cards would leave the 60-card deck empty
        ("expedition_cost", -1),
        ("bonus_threshold", 0),
        ("bonus", -1),
        ("max_turns", 1),
        ("max_turns", 1_000_001),
        ("n_colors", 5.0),
        ("bonus", True),
    ],
)
def test_invalid_field_raises_a_config_error_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"Rules\.{field}={value!r} is invalid"):
        Rules(**{field: value})


def test_classic_type_ids_follow_color_times_eleven_plus_rank():
    rules = Rules.classic()
    assert rules.type_id(0, 0) == 0  # red wager
    assert rules.type_id(0, 9) == 9  # red 10
    assert rules.type_id(1, 0) == 10  # green wager
    assert rules.type_id(4, 9) == 49  # yellow 10
    for t in range(rules.n_types):
        assert rules.type_id(*rules.type_color_rank(t)) == t


def test_classic_action_ids_are_play_discard_draw_deck_draw_pile():
    rules = Rules.classic()
    assert [rules.play_action(t) for t in (0, 49)] == [0, 49]
    assert [rules.discard_action(t) for t in (0, 49)] == [50, 99]
    assert rules.draw_deck_action == 100
    assert [rules.draw_pile_action(c) for c in range(5)] == [101, 102, 103, 104, 105]


def test_face_values_copies_and_names():
    rules = Rules.classic()
    assert [rules.face_value(r) for r in range(10)] == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert rules.copies(rules.type_id(2, 0)) == 3
    assert rules.copies(rules.type_id(2, 5)) == 1
    assert rules.card_name(rules.type_id(0, 0)) == "R*"
    assert rules.card_name(rules.type_id(0, 9)) == "R10"
    assert rules.card_name(rules.type_id(2, 6)) == "B7"
    assert rules.action_name(7) == "play R8"
    assert rules.action_name(50) == "discard R*"
    assert rules.action_name(100) == "draw deck"
    assert rules.action_name(102) == "draw pile G"
    assert "out of range" in rules.action_name(106)


def test_full_deck_is_sorted_with_n_wagers_copies_of_each_wager():
    rules = Rules.classic()
    deck = rules.full_deck()
    assert deck == sorted(deck)
    assert deck.count(rules.type_id(3, 0)) == 3
    assert all(deck.count(rules.type_id(3, r)) == 1 for r in range(1, 10))


def _ranks(cards: str) -> list[int]:
    """Rank indexes of a classic expedition written as on the rules page: "W 2 3" (W = wager)."""
    rules = Rules.classic()
    return [0 if c == "W" else int(c) - rules.min_rank + 1 for c in cards.split()]


@pytest.mark.parametrize(
    ("cards", "score"),
    [
        ("", 0),
        ("W", -40),
        ("W W W", -80),
        ("2 3 4", -11),
        ("4 5 6 7 8 9 10", 29),
        ("W 2 3 4 5 6 7 8", 50),
        ("W W 5 6 7 8 9 10", 95),
        ("W W W 2 3 4 5 6 7 8 9 10", 156),
    ],
)
def test_expedition_score_matches_the_worked_values_of_the_rules_page(cards, score):
    assert expedition_score(Rules.classic(), _ranks(cards)) == score
