"""Relabelling the colours maps a game onto an equal one (``game/symmetry.py``)."""

import random

import torch
from hypothesis import given
from hypothesis import strategies as st

from lostcities_cfr.game import GameBatch, GameState, Rules
from lostcities_cfr.game.encoding import encode_history
from lostcities_cfr.game.symmetry import (
    action_layout,
    feature_layout,
    permute,
    permute_rows,
    random_permutations,
)

CLASSIC = Rules(max_turns=400)


def relabel_type(rules: Rules, t: int, pi: list[int]) -> int:
    color, r = rules.type_color_rank(t)
    return rules.type_id(pi[color], r)


def relabel_action(rules: Rules, action: int, pi: list[int]) -> int:
    T = rules.n_types
    if action < 2 * T:
        return (action // T) * T + relabel_type(rules, action % T, pi)
    if action == 2 * T:
        return action
    return rules.draw_pile_action(pi[action - 2 * T - 1])


def relabelled(state: GameState, pi: list[int]) -> GameState:
    """``state`` with colour c renamed pi[c] everywhere: hands, deck, piles, expeditions."""
    rules, C = state.rules, state.rules.n_colors
    out = state.clone()
    out.hands = [sorted(relabel_type(rules, t, pi) for t in hand) for hand in state.hands]
    out.deck = [relabel_type(rules, t, pi) for t in state.deck]
    out.piles = [None] * C
    out.expeditions = [[None] * C for _ in range(2)]
    for c in range(C):
        out.piles[pi[c]] = state.piles[c][:]
        for p in range(2):
            out.expeditions[p][pi[c]] = state.expeditions[p][c][:]
    out.known = [[0] * rules.n_types for _ in range(2)]
    for p in range(2):
        for t, n in enumerate(state.known[p]):
            out.known[p][relabel_type(rules, t, pi)] = n
    if state.discarded_color is not None:
        out.discarded_color = pi[state.discarded_color]
    return out


def as_row(pi: list[int]) -> torch.Tensor:
    return torch.tensor([pi])


@given(seed=st.integers(0, 10_000), moves=st.integers(0, 120))
def test_a_relabelled_game_has_relabelled_features_masks_and_history(seed, moves):
    rng = random.Random(seed)
    state = GameState.new(CLASSIC, seed=seed)
    for _ in range(moves):
        if state.is_terminal:
            break
        state.apply(rng.choice(state.legal_actions()))
    pi = list(range(CLASSIC.n_colors))
    rng.shuffle(pi)
    original, image = GameBatch.from_states([state]), GameBatch.from_states([relabelled(state, pi)])
    features, history = feature_layout(CLASSIC), feature_layout(CLASSIC, history=True)
    actions = action_layout(CLASSIC)
    torch.testing.assert_close(permute(original.encode(), features, as_row(pi)), image.encode())
    torch.testing.assert_close(
        permute(encode_history(original), history, as_row(pi)), encode_history(image)
    )
    assert torch.equal(permute(original.legal_mask(), actions, as_row(pi)), image.legal_mask())


@given(seed=st.integers(0, 10_000))
def test_a_relabelled_deal_played_with_relabelled_actions_scores_the_same(seed):
    rng = random.Random(seed)
    state = GameState.new(CLASSIC, seed=seed)
    pi = list(range(CLASSIC.n_colors))
    rng.shuffle(pi)
    image = relabelled(state, pi)
    while not state.is_terminal:
        action = rng.choice(state.legal_actions())
        assert relabel_action(CLASSIC, action, pi) in image.legal_actions()
        state.apply(action)
        image.apply(relabel_action(CLASSIC, action, pi))
    assert image.is_terminal and image.scores() == state.scores()


def test_rows_keep_their_targets_on_the_relabelled_actions():
    games = GameBatch.new(CLASSIC, 64, seed=3)
    features, legal = games.encode(), games.legal_mask()
    targets = torch.randn(legal.shape) * legal
    generator = torch.Generator().manual_seed(0)
    out = permute_rows(
        features, legal, targets, feature_layout(CLASSIC), action_layout(CLASSIC), generator
    )
    f2, l2, t2 = out
    # Same multiset of values per row, targets still zero off the legal actions, and the
    # target of every legal action follows it to its new id.
    assert torch.equal(f2.sort(1).values, features.sort(1).values)
    assert not t2[~l2].any()
    torch.testing.assert_close(t2.sort(1).values, targets.sort(1).values)
    assert (f2 != features).any(), "120 relabellings: some row must change"


def test_random_permutations_are_permutations_and_cover_all_orders():
    perms = random_permutations(5000, 3, torch.Generator().manual_seed(1))
    assert torch.equal(perms.sort(1).values, torch.arange(3).expand(5000, 3))
    assert len({tuple(p) for p in perms.tolist()}) == 6
