"""ColorNet treats the colours alike: equivariant action outputs, an invariant value."""

import pytest
import torch

from lostcities_cfr.cfr.color_network import ColorNet
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import GameBatch, Rules, feature_size
from lostcities_cfr.game.encoding import encode_history, feature_blocks, history_feature_size
from lostcities_cfr.game.symmetry import (
    action_layout,
    feature_layout,
    permute,
    random_permutations,
)

RULES = Rules(max_turns=400)


def states() -> GameBatch:
    games = GameBatch.new(RULES, 32, seed=4)
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):  # a few random moves so that expeditions and piles are not empty
        legal = games.legal_mask().float()
        games.step(torch.multinomial(legal, 1, generator=generator).squeeze(1))
    return games


def test_relabelling_the_colours_relabels_the_action_outputs():
    torch.manual_seed(0)
    net = ColorNet(RULES, feature_size(RULES), RULES.n_actions, width=32, depth=3)
    features = states().encode()
    perm = random_permutations(len(features), RULES.n_colors, torch.Generator().manual_seed(1))
    moved = net(permute(features, feature_layout(RULES), perm))
    torch.testing.assert_close(moved, permute(net(features), action_layout(RULES), perm))


def test_relabelling_the_colours_leaves_the_value_unchanged():
    torch.manual_seed(0)
    net = ColorNet(RULES, history_feature_size(RULES), 1, width=32, depth=2)
    history = encode_history(states())
    perm = random_permutations(len(history), RULES.n_colors, torch.Generator().manual_seed(2))
    moved = permute(history, feature_layout(RULES, history=True), perm)
    torch.testing.assert_close(net(moved), net(history))


def test_it_learns_a_colour_sum():
    # The cards in the discard piles, a sum over colours a flat MLP must learn five times.
    torch.manual_seed(0)
    net = ColorNet(RULES, feature_size(RULES), 1, width=32, depth=2)
    features = states().encode()
    piles = feature_blocks(RULES)["pile_counts"]
    target = features[:, piles].sum(1, keepdim=True)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(300):
        loss = ((net(features) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert float(loss) < 0.01 * float(target.var())


@pytest.mark.parametrize("sizes", [(17, 106), (423, 7)])
def test_sizes_that_fit_no_layout_are_refused(sizes):
    with pytest.raises(ConfigError, match="ColorNet"):
        ColorNet(RULES, *sizes)
