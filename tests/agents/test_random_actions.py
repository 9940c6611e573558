"""Random legal actions: uniform over each row's legal actions, the k-th legal action of
one 16-bit draw per row."""

import pytest
import torch

from lostcities_cfr.agents import random_legal_actions
from lostcities_cfr.game import Rules

CLASSIC = Rules.classic()


def test_random_legal_actions_is_uniform_over_legal_actions():
    legal = torch.zeros(20_000, CLASSIC.n_actions, dtype=torch.bool)
    legal[:, [3, 50, 99, 105]] = True
    legal[1::2, 50] = False
    actions = random_legal_actions(legal, torch.Generator().manual_seed(0))
    even, odd = actions[0::2], actions[1::2]
    for action in (3, 50, 99, 105):
        assert abs((even == action).float().mean().item() - 0.25) < 0.02
    for action in (3, 99, 105):
        assert abs((odd == action).float().mean().item() - 1 / 3) < 0.02
    assert not (odd == 50).any()


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
