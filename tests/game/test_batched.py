"""The batched engine on its own: dealing, stepping, selection, errors, devices."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import GameBatch, IllegalActionError, Rules, feature_size

CLASSIC = Rules.classic()


def play_random(batch: GameBatch, seed: int, steps: int | None = None) -> None:
    generator = torch.Generator().manual_seed(seed)
    n = 0
    while not bool(batch.done.all()) and (steps is None or n < steps):
        batch.step(random_legal_actions(batch.legal_mask(), generator))
        n += 1


def card_totals(batch: GameBatch) -> torch.Tensor:
    """[B, T] copies of each type in hands, expeditions, piles and the undrawn deck."""
    rules = batch.rules
    B, T, R1 = batch.batch_size, rules.n_types, rules.n_ranks + 1
    totals = batch.hands.sum(1).long() + batch.expeditions.sum(1).long()
    for b in range(B):
        for c in range(rules.n_colors):
            for r in batch.piles[b, c, : int(batch.pile_len[b, c])].tolist():
                totals[b, c * R1 + r] += 1
        for t in batch.deck[b, int(batch.deck_pos[b]) :].tolist():
            totals[b, t] += 1
    return totals.view(B, T)


def test_new_deals_full_hands_and_is_reproducible():
    a = GameBatch.new(CLASSIC, 16, seed=5)
    b = GameBatch.new(CLASSIC, 16, seed=5)
    assert torch.equal(a.hands, b.hands) and torch.equal(a.deck, b.deck)
    assert (a.hands.sum(2) == CLASSIC.hand_size).all()
    assert (a.deck_count == CLASSIC.deck_size - 2 * CLASSIC.hand_size).all()
    assert not torch.equal(a.hands, GameBatch.new(CLASSIC, 16, seed=6).hands)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(0, 300))
def test_cards_are_conserved_and_expeditions_ascend(seed, steps):
    batch = GameBatch.new(CLASSIC, 8, seed=seed)
    play_random(batch, seed, steps)
    copies = torch.tensor([CLASSIC.copies(t) for t in range(CLASSIC.n_types)])
    assert torch.equal(card_totals(batch), copies.expand(8, -1))
    for state in batch.to_states():
        for player in state.expeditions:
            for ranks in player:
                numbers = [r for r in ranks if r > 0]
                assert numbers == sorted(set(numbers))
                assert ranks == sorted(ranks)  # wagers (0) come first


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_random_games_end_long_before_max_turns_returning_the_score_difference(seed):
    batch = GameBatch.new(CLASSIC, 32, seed=seed)
    play_random(batch, seed)
    assert (batch.turn < 2000).all()
    assert (batch.deck_count == 0).all()
    scores = batch.scores().float()  # [B, 2]
    difference = scores[:, 0] - scores[:, 1]
    assert torch.equal(batch.returns(), torch.stack([difference, -difference], dim=1))


def test_illegal_action_raises_names_it_and_changes_nothing():
    batch = GameBatch.new(CLASSIC, 4, seed=1)
    before = batch.clone()
    actions = random_legal_actions(batch.legal_mask())
    actions[2] = CLASSIC.draw_deck_action  # a draw during the card decision
    with pytest.raises(IllegalActionError, match=r"game 2 of 4: draw deck \(action 100\)"):
        batch.step(actions)
    assert batch.to_states() == before.to_states()
    with pytest.raises(IllegalActionError, match="out of range"):
        batch.step(torch.full((4,), CLASSIC.n_actions))
    with pytest.raises(ValueError, match=r"shape \[4\]"):
        batch.step(torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_actions_of_a_non_integer_dtype_are_refused_not_truncated(dtype):
    batch = GameBatch.new(CLASSIC, 4, seed=1)
    before = batch.clone()
    actions = random_legal_actions(batch.legal_mask()).to(dtype)
    with pytest.raises(TypeError, match=f"dtype {dtype}; expected an integer dtype"):
        batch.step(actions + 0.5 if dtype.is_floating_point else actions)
    assert batch.to_states() == before.to_states()


def test_finished_games_ignore_actions_and_have_no_legal_action():
    batch = GameBatch.new(CLASSIC, 6, seed=2)
    play_random(batch, 2)
    finished = batch.clone()
    actions = torch.full((6,), -7, dtype=torch.int32)  # the engine's own index dtype
    batch.step(actions)  # ignored, not an error
    assert batch.to_states() == finished.to_states()
    assert not batch.legal_mask().any()
    assert (actions == -7).all()  # the caller's tensor is left as it was


def test_select_forks_games_that_then_diverge():
    batch = GameBatch.new(CLASSIC, 3, seed=4)
    play_random(batch, 4, steps=10)
    forks = batch.select(torch.tensor([1, 1, 1, 0]))
    assert forks.to_states()[0] == batch.to_states()[1] == forks.to_states()[2]
    legal = forks.legal_mask()[0].nonzero().flatten()
    forks.step(
        torch.stack([legal[0], legal[1], legal[0], random_legal_actions(forks.legal_mask())[3]])
    )
    states = forks.to_states()
    assert states[0] == states[2] != states[1]
    assert batch.to_states()[1].turn == 10  # the source batch is untouched
    assert GameBatch.cat([batch, forks]).batch_size == 7


def test_encode_shape_and_viewer_argument():
    batch = GameBatch.new(CLASSIC, 5, seed=9)
    play_random(batch, 9, steps=13)
    features = batch.encode()
    assert features.shape == (5, feature_size(CLASSIC)) and features.dtype == torch.float32
    assert torch.equal(batch.encode(batch.current_player), features)
    assert not torch.equal(batch.encode(1 - batch.current_player), features)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_games_match_cpu_games():
    cpu = GameBatch.new(CLASSIC, 256, seed=8)
    gpu = cpu.to("cuda")
    generator = torch.Generator().manual_seed(8)
    while not bool(cpu.done.all()):
        actions = random_legal_actions(cpu.legal_mask(), generator)
        assert torch.equal(gpu.legal_mask().cpu(), cpu.legal_mask())
        assert torch.equal(gpu.encode().cpu(), cpu.encode())
        cpu.step(actions)
        gpu.step(actions.cuda())
    assert torch.equal(gpu.scores().cpu(), cpu.scores())


def test_encode_and_legal_mask_are_kept_until_the_state_changes():
    rules = Rules.classic()
    games = GameBatch.new(rules, 8, seed=2)
    features, legal = games.encode(), games.legal_mask()
    assert games.encode() is features and games.legal_mask() is legal  # computed once
    cut = torch.zeros(8, dtype=torch.bool)
    cut[3] = True
    games.done = games.done | cut  # a sampler cutting a game short: no legal action there
    assert games.encode() is features
    assert not games.legal_mask()[3].any() and torch.equal(games.legal_mask()[:3], legal[:3])
    games.step(random_legal_actions(games.legal_mask(), torch.Generator().manual_seed(0)))
    fresh = GameBatch.from_states(games.to_states())  # the same state, nothing kept
    assert torch.equal(games.encode(), fresh.encode())
    others = torch.arange(8) != 3  # (the states do not say that game 3 was cut)
    assert torch.equal(games.legal_mask()[others], fresh.legal_mask()[others])
