"""The batched engine's internal bookkeeping: derived state, old-style construction, sampling."""

import pytest
import torch

from lostcities_cfr.game import GameBatch, GameState, Rules, random_legal_actions
from lostcities_cfr.game.batched import _top_ranks

PRESETS = {"classic": Rules.classic(), "six_colors": Rules.six_colors(), "tiny": Rules.tiny()}


def assert_bookkeeping(batch: GameBatch) -> None:
    """``_top`` equals what the expeditions imply, and pile slots above ``pile_len`` hold 0."""
    assert torch.equal(batch._top, _top_ranks(batch.rules, batch.expeditions.permute(1, 2, 0)))
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
    forks = GameBatch.cat([batch.select([3, 1, 1]), batch.repeat(2).clone()])
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


@pytest.mark.parametrize("width", [1, 2, 7, 13, 106, 127, 128, 151])
def test_random_legal_actions_takes_the_kth_legal_action_of_one_16_bit_draw(width):
    """Row b's draw r is the b-th 16-bit word of int64 words from the generator, and
    the pick is the (n - 1 - (r * n >> 16))-th of the row's n legal actions."""
    masks = torch.rand(300, width, generator=torch.Generator().manual_seed(width)) < 0.3
    masks[::7] = False  # rows with no legal action
    masks[1::11] = True
    actions = random_legal_actions(masks, torch.Generator().manual_seed(1))
    words = torch.empty(75, dtype=torch.int64)
    words.random_(-(2**63), None, generator=torch.Generator().manual_seed(1))
    draws = words.view(torch.uint16).tolist()  # 4 per word, little-endian
    for row, (mask, action) in enumerate(zip(masks, actions.tolist(), strict=True)):
        legal = mask.nonzero().flatten().tolist()
        n = len(legal)
        assert action == (legal[n - 1 - (draws[row] * n >> 16)] if legal else 0), f"row {row}"


def test_the_16_bit_draw_picks_each_of_n_actions_within_2_to_the_minus_16_of_1_over_n():
    r = torch.arange(2**16)  # every draw once
    for n in range(1, 128):
        k = n - 1 - (r * n >> 16)
        p = torch.bincount(k, minlength=n).double() / 2**16
        assert float((p - 1 / n).abs().max()) < 2**-16, n
