"""The heuristic agent on hand-built positions (each rule of its docstring), its blindness
to hidden cards, and the guarantee that heuristic games end."""

import dataclasses
import random

import pytest

from lostcities_cfr.agents import HEURISTIC_PRESETS, HeuristicAgent, HeuristicParams, act_single
from lostcities_cfr.game import GameBatch, GameState, Rules

CLASSIC = Rules.classic()
T = CLASSIC.n_types
DEALT_DECK = CLASSIC.deck_size - 2 * CLASSIC.hand_size  # 44


def ids(names: str) -> list[int]:
    by_name = {CLASSIC.card_name(t): t for t in range(T)}
    return [by_name[name] for name in names.split()]


def position(
    hand: str,
    own: str = "",
    opp: str = "",
    piles: str = "",
    deck: int = DEALT_DECK,
    phase: int = 0,
) -> GameState:
    """Player 0 to move with ``hand``; expeditions and piles as written (cards in order);
    the opponent holds the next 8 unused cards and the deck ``deck`` of the rest."""
    rest = CLASSIC.full_deck()
    expeditions = [[[] for _ in range(CLASSIC.n_colors)] for _ in range(2)]
    pile_lists = [[] for _ in range(CLASSIC.n_colors)]
    for player, cards in ((0, own), (1, opp)):
        for t in ids(cards):
            color, r = CLASSIC.type_color_rank(t)
            expeditions[player][color].append(r)
            rest.remove(t)
    for t in ids(piles):
        color, r = CLASSIC.type_color_rank(t)
        pile_lists[color].append(r)
        rest.remove(t)
    for t in ids(hand):
        rest.remove(t)
    # an even number of whole turns keeps player 0 to move; no pile draws so far
    turns = DEALT_DECK - deck + (DEALT_DECK - deck) % 2
    return GameState(
        rules=CLASSIC,
        hands=[sorted(ids(hand)), sorted(rest[:8])],
        expeditions=expeditions,
        piles=pile_lists,
        deck=rest[8 : 8 + deck],
        known=[[0] * T, [0] * T],
        turn=2 * turns + phase,
    )


def action_of(state: GameState, preset: str = "balanced") -> str:
    return CLASSIC.action_name(act_single(HeuristicAgent(preset), state))


def test_opens_a_colour_whose_cards_clear_the_cost_with_its_lowest_card():
    assert action_of(position("R6 R8 R9 R10 G2 B3 W4 Y5")) == "play R6"


def test_does_not_open_a_colour_that_cannot_pay_the_cost():
    assert action_of(position("R2 R7 G3 G8 B4 B9 W5 Y6")).startswith("discard")


def test_extends_a_started_expedition_with_its_lowest_card():
    assert action_of(position("R4 R7 G2 B3 W4 Y5 Y6 G10", own="R3")) == "play R4"


def test_wagers_early_with_strong_follow_up():
    assert action_of(position("R* R6 R7 R8 R9 G2 B3 W4")) == "play R*"


@pytest.mark.parametrize("preset", sorted(HEURISTIC_PRESETS))
def test_never_wagers_late(preset):
    assert action_of(position("R* R6 R7 R8 R9 G2 B3 W4", deck=8), preset) != "play R*"


def test_does_not_open_when_too_few_turns_are_left():
    assert action_of(position("R7 R8 R9 G2 B3 W4 Y5 Y6", deck=2)).startswith("discard")


def test_plays_its_most_valuable_card_when_one_turn_is_left():
    # one card decision left: R5 would be worth 5, B10 worth 10
    assert action_of(position("R5 B10 G2 G3 W4 Y5 Y6 W2", own="R4 B9", deck=2)) == "play B10"


def test_takes_a_pile_card_that_extends_its_expedition():
    state = position("R9 G2 B3 W4 Y5 Y6 G10 B4", own="R5", piles="R6", deck=30, phase=1)
    assert action_of(state) == "draw pile R"


def test_stops_drawing_from_piles_once_the_game_has_used_its_pile_draw_budget():
    state = position("R9 G2 B3 W4 Y5 Y6 G10 B4", own="R5", piles="R6", deck=30, phase=1)
    state.turn += 2 * HEURISTIC_PRESETS["balanced"].max_pile_draws  # that many pile draws
    assert action_of(state) == "draw deck"


def test_takes_a_pile_card_to_deny_the_opponent():
    state = position("R9 R2 B3 W4 Y5 Y6 R10 B4", opp="G5 G6", piles="G9", deck=30, phase=1)
    assert action_of(state) == "draw pile G"


def test_draws_from_the_deck_when_no_pile_card_helps_anyone():
    state = position("R9 R2 B3 W4 Y5 Y6 R10 B4", own="G7", opp="G8", piles="G3", phase=1)
    assert action_of(state) == "draw deck"


def test_discards_a_card_dead_for_both_players_before_one_the_opponent_needs():
    # Y3 is below both yellow expeditions; B8 extends the opponent's blue expedition.
    state = position("Y3 B8 R2 G3 W2 W3 G4 R3", own="Y9", opp="Y7 B5 B6", deck=30)
    assert action_of(state) == "discard Y3"


def test_decides_only_from_what_the_player_to_move_knows():
    """Reshuffling the opponent's hidden hand with the deck never changes a decision."""
    rng = random.Random(0)
    agent = HeuristicAgent("balanced")
    checked = 0
    for seed in range(40):
        state = GameState.new(CLASSIC, seed=seed)
        for _ in range(rng.randrange(0, 60)):
            if state.is_terminal:
                break
            state.apply(rng.choice(state.legal_actions()))
        if state.is_terminal:
            continue
        other = state.clone()
        them = 1 - other.current_player
        # the opponent's hidden cards (all but those known from pile draws) plus the deck
        hidden = list(other.hands[them])
        for t in range(T):
            for _ in range(other.known[them][t]):
                hidden.remove(t)
        pool = hidden + other.deck
        rng.shuffle(pool)
        known = [t for t in range(T) for _ in range(other.known[them][t])]
        other.hands[them] = sorted(known + pool[: len(hidden)])
        other.deck = pool[len(hidden) :]
        assert act_single(agent, state) == act_single(agent, other)
        checked += 1
    assert checked >= 30


def _longest_game(agents: tuple[HeuristicAgent, HeuristicAgent], games: int, seed: int) -> int:
    """Decisions in the longest of ``games`` games, seat 0 ``agents[0]``; all must end."""
    batch = GameBatch.new(CLASSIC, games, seed=seed)
    step = 0
    while not bool(batch.done.all()):
        batch.step(agents[(step // 2) % 2].act(batch))
        step += 1
        assert step < CLASSIC.max_turns
    return int(batch.turn.max())


@pytest.mark.parametrize(
    "params",
    [
        *HEURISTIC_PRESETS.values(),
        # the most pile-hungry settings: deny everything, take any useful card
        HeuristicParams(deny_weight=1.0, deny_min_value=0.0, gap_tolerance=1.0, max_pile_draws=60),
    ],
)
def test_games_between_heuristics_end_within_the_pile_draw_budget(params):
    agents = (HeuristicAgent(params), HeuristicAgent("balanced"))
    longest = max(_longest_game(agents, 64, seed=1), _longest_game(agents[::-1], 64, seed=2))
    # every turn draws once: at most the dealt deck plus the pile-draw budget of the
    # more generous agent, two decisions each
    assert longest <= 2 * (DEALT_DECK + max(params.max_pile_draws, 40))


def test_every_parameter_is_documented_with_its_meaning():
    doc = HeuristicParams.__doc__
    for field in dataclasses.fields(HeuristicParams):
        assert f"{field.name}:" in doc


def test_rejects_unknown_presets_and_negative_parameters():
    with pytest.raises(ValueError, match="unknown heuristic preset 'bold'"):
        HeuristicAgent("bold")
    with pytest.raises(ValueError, match="deny_weight"):
        HeuristicParams(deny_weight=-1.0)


def test_scores_every_action_of_every_game_in_one_batch_without_nan():
    batch = GameBatch.new(CLASSIC, 64, seed=0)
    agent = HeuristicAgent()
    while not bool(batch.done.all()):  # every position of a round, both decisions
        scores = agent.action_scores(batch)
        assert scores.shape == (64, CLASSIC.n_actions)
        assert not scores.isnan().any()
        batch.step(agent.act(batch))
