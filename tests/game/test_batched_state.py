"""The batched engine's internal bookkeeping: derived state and old-style construction."""

import pytest
import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import GameBatch, GameState, Rules
from lostcities_cfr.game.packed import top_ranks

PRESETS = {"classic": Rules.classic(), "six_colors": Rules.six_colors(), "tiny": Rules.tiny()}


def assert_bookkeeping(batch: GameBatch) -> None:
    """``_top`` equals what the expeditions imply, and pile slots above ``pile_len`` hold 0."""
    assert torch.equal(batch._top, top_ranks(batch.rules, batch.expeditions.permute(1, 2, 0)))
    slots = torch.arange(batch.rules.pile_capacity)
    above = slots >= batch.pile_len[:, :, None]  # [B, C, L]
    assert not batch.piles[above].any()


@pytest.mark.parametrize("preset", PRESETS)
def test_incremental_state_matches_the_expeditions_and_piles(preset):
    rules = PRESETS[preset]
    batch = GameBatch.new(rules, 64, seed=7)
    generator = torch.Generator().manual_seed(7)
    while not bool(batch.done.all()):
        batch.step(random_legal_actions(batch.legal_mask(), generator))
        assert_bookkeeping(batch)
    forks = GameBatch.cat([batch.select([3, 1, 1]), batch.clone()])
    assert_bookkeeping(forks)
    assert torch.equal(forks.legal_mask(), GameBatch.from_states(forks.to_states()).legal_mask())


def test_low_level_constructor_accepts_the_state_without_derived_tensors():
    rules = Rules.classic()
    states = [GameState.new(rules, seed=s) for s in range(6)]
    for i, state in enumerate(states):
        for _ in range(20 + 3 * i):
            state.apply(state.legal_actions()[0])
    batch = GameBatch.from_states(states)
    old_style = {name: getattr(batch, name) for name in ("deck_pos", "turn", "discarded", "done")}
    for name in ("_piles", "_deck"):
        old_style[name] = getattr(batch, name)
    for name in ("hands", "known", "expeditions"):  # counts per type, batch-last
        old_style[f"_{name}"] = getattr(batch, name).permute(1, 2, 0)
    old_style["_pile_len"] = batch._pile_len.long()  # the dtype before int8
    rebuilt = GameBatch(rules, **old_style)
    assert torch.equal(rebuilt._top, batch._top) and rebuilt._pile_len.dtype == torch.int8
    for name in ("_hand_known", "_played"):
        assert torch.equal(getattr(rebuilt, name), getattr(batch, name)), name
    assert torch.equal(rebuilt.legal_mask(), batch.legal_mask())
    assert torch.equal(rebuilt.encode(), batch.encode())
    assert batch.pile_len.dtype == torch.int64 and batch.pile_len.shape == (6, rules.n_colors)
    colour_major = {**old_style, "_piles": batch._piles.transpose(0, 1)}  # [C, L, B]: not ours
    with pytest.raises(ValueError, match=r"_piles must be \[L, C, B\]"):
        GameBatch(rules, **colour_major)
