"""World samplers: the batched one equals the reference one, worlds are legal deals of
what the player has not seen, and nothing hidden changes them."""

import random
from collections import Counter

import pytest
import torch
from hidden_cards import resample_hidden
from search_positions import CLASSIC, random_positions

from lostcities_cfr.game import GameBatch, GameState, Rules
from lostcities_cfr.search import (
    deal_world,
    deal_worlds,
    sample_world,
    unseen_cards,
    unseen_counts,
    world_keys,
)

WORLDS = 3


def seen_by_mover(state: GameState) -> tuple:
    """Everything the player to move knows, as a comparable value."""
    p = state.current_player
    return (
        state.hands[p],
        state.expeditions,
        state.piles,
        len(state.deck),
        state.known,
        state.turn,
        state.discarded_color,
    )


def assert_legal_world(state: GameState, world: GameState) -> None:
    """``world`` is a deal ``state``'s player to move cannot tell from ``state``."""
    rules, them = state.rules, 1 - state.current_player
    assert seen_by_mover(world) == seen_by_mover(state)
    assert len(world.hands[them]) == len(state.hands[them])
    held = Counter(world.hands[them])
    assert all(held[t] >= n for t, n in enumerate(state.known[them]))  # known cards stay
    # every card exactly once: the dealt cards are the unseen ones, no more, no fewer
    where = Counter(world.hands[0]) + Counter(world.hands[1]) + Counter(world.deck)
    for player in world.expeditions:
        for color, ranks in enumerate(player):
            where.update(rules.type_id(color, r) for r in ranks)
    for color, pile in enumerate(world.piles):
        where.update(rules.type_id(color, r) for r in pile)
    assert where == Counter(rules.full_deck())
    dealt = Counter(world.hands[them]) + Counter(world.deck)
    dealt.subtract({t: n for t, n in enumerate(state.known[them]) if n})
    assert +dealt == Counter(unseen_cards(state))


@pytest.mark.parametrize(
    ("rules_name", "games", "seed"), [("classic", 12, 1), ("tiny", 6, 8), ("six-colors", 6, 8)]
)
def test_batched_worlds_equal_the_reference_worlds_for_the_same_keys(rules_name, games, seed):
    rules = Rules.preset(rules_name)
    states = random_positions(games, seed=seed, rules=rules)
    keys = torch.rand(
        len(states), WORLDS, rules.deck_size, generator=torch.Generator().manual_seed(seed)
    )
    worlds = deal_worlds(GameBatch.from_states(states), keys).to_states()
    for b, state in enumerate(states):
        n = len(unseen_cards(state))
        for w in range(WORLDS):
            assert worlds[b * WORLDS + w] == deal_world(state, keys[b, w, :n].tolist())


def test_worlds_hold_the_known_cards_and_only_legal_hands():
    states = random_positions(30, seed=2)
    assert sum(any(s.known[1 - s.current_player]) for s in states) >= 5  # known cards covered
    batch = GameBatch.from_states(states)
    worlds = deal_worlds(batch, world_keys(batch, WORLDS, torch.Generator().manual_seed(1)))
    for i, world in enumerate(worlds.to_states()):
        assert_legal_world(states[i // WORLDS], world)
    rng = random.Random(3)
    for state in states:
        assert_legal_world(state, sample_world(state, rng))


def test_worlds_ignore_the_hidden_cards_they_replace():
    rng = random.Random(4)
    states = random_positions(10, seed=4)
    reshuffled = [resample_hidden(s, s.current_player, rng) for s in states]
    assert any(a.deck != b.deck for a, b in zip(states, reshuffled, strict=True))
    keys = world_keys(GameBatch.from_states(states), WORLDS, torch.Generator().manual_seed(2))
    for b, (state, other) in enumerate(zip(states, reshuffled, strict=True)):
        own_keys = keys[b, 0, : len(unseen_cards(state))].tolist()
        assert deal_world(state, own_keys) == deal_world(other, own_keys)
    a = deal_worlds(GameBatch.from_states(states), keys)
    b = deal_worlds(GameBatch.from_states(reshuffled), keys)
    for name in ("_hand_known", "_played", "_piles", "_pile_len", "_deck", "_deck_pos", "_turn"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_unseen_counts_are_the_reference_unseen_cards():
    states = random_positions(8, seed=5)
    counts = unseen_counts(GameBatch.from_states(states))
    for b, state in enumerate(states):
        assert counts[b].tolist() == [unseen_cards(state).count(t) for t in range(CLASSIC.n_types)]


def test_uniform_keys_deal_each_unseen_card_to_the_opponent_equally_often():
    # the opponent holds each unseen copy with probability hidden / unseen: a binomial check
    state = random_positions(1, seed=6)[0]
    n_worlds = 4000
    batch = GameBatch.from_states([state])
    worlds = deal_worlds(batch, world_keys(batch, n_worlds, torch.Generator().manual_seed(3)))
    them = 1 - state.current_player
    known = torch.tensor(state.known[them])
    held = (worlds.hands[:, them].long() - known).sum(0).float() / n_worlds  # [T]
    unseen = torch.tensor([unseen_cards(state).count(t) for t in range(CLASSIC.n_types)])
    hidden = len(state.hands[them]) - int(known.sum())
    expected = unseen * hidden / len(unseen_cards(state))
    spread = (expected * (1 - expected / unseen.clamp(min=1)) / n_worlds).sqrt()
    assert ((held - expected).abs() <= 5 * spread + 1e-6).all()


def test_reference_sampler_is_seeded():
    state = random_positions(1, seed=7)[0]
    assert sample_world(state, random.Random(9)) == sample_world(state, random.Random(9))
