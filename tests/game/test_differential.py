"""Differential tests: the batched engine against the reference engine.

Both engines start from the same deals and receive the same actions; at every
step the legal masks, the features of both players and the scores must agree.
"""

import pytest
import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import GameBatch, GameState, Rules


def replay_lockstep(rules: Rules, n_games: int, seed: int, both_every: int = 10) -> int:
    """Play ``n_games`` random games through both engines; returns decisions compared.

    The features of the player to move are compared at every step, those of
    both players every ``both_every`` steps (the reference encoder is the slow part).
    """
    states = [GameState.new(rules, seed=seed * 100_000 + i) for i in range(n_games)]
    batch = GameBatch.from_states(states)
    generator = torch.Generator().manual_seed(seed)
    compared, step = 0, 0
    while not bool(batch.done.all()):
        mask = batch.legal_mask()
        expected = torch.zeros_like(mask)
        for b, state in enumerate(states):
            expected[b, state.legal_actions()] = True
        assert torch.equal(mask, expected), f"step {step}: masks differ"
        assert batch.done.tolist() == [s.is_terminal for s in states]
        assert batch.scores().tolist() == [list(s.scores()) for s in states]
        viewers = [[s.current_player for s in states]]
        if step % both_every == 0:
            viewers += [[1 - s.current_player for s in states]]
        for viewer in viewers:
            reference = torch.tensor(
                [s.information_state(p) for s, p in zip(states, viewer, strict=True)]
            )
            assert torch.allclose(batch.encode(torch.tensor(viewer)), reference), f"step {step}"
        actions = random_legal_actions(mask, generator)
        for b, state in enumerate(states):
            if not state.is_terminal:
                state.apply(int(actions[b]))
                compared += 1
        batch.step(actions)
        step += 1
    assert batch.returns().tolist() == [list(s.returns()) for s in states]
    return compared


# 1000 games in ten chunks of 100; the first runs by default, the rest with `-m slow`
# (the plain-Python reference encoder makes each chunk take ~10-20 s on 2 cores).
@pytest.mark.parametrize(
    "chunk", [0, *(pytest.param(c, marks=pytest.mark.slow) for c in range(1, 10))]
)
def test_1000_random_classic_games_agree_at_every_step(chunk):
    assert replay_lockstep(Rules.classic(), n_games=100, seed=chunk) > 100 * 88


def test_six_color_and_tiny_games_agree_at_every_step():
    replay_lockstep(Rules.six_colors(), n_games=50, seed=11)
    replay_lockstep(Rules.tiny(), n_games=200, seed=12)


def test_to_states_round_trips_mid_game():
    rules = Rules.classic()
    batch = GameBatch.new(rules, 64, seed=3)
    generator = torch.Generator().manual_seed(3)
    for _ in range(57):
        batch.step(random_legal_actions(batch.legal_mask(), generator))
    states = batch.to_states()
    again = GameBatch.from_states(states)
    assert again.to_states() == states
    assert torch.equal(again.encode(), batch.encode())
    assert torch.equal(again.legal_mask(), batch.legal_mask())
