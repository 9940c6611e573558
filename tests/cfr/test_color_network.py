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
    assert loss.item() < 0.01 * float(target.var())


@pytest.mark.parametrize("sizes", [(17, 106), (423, 7)])
def test_sizes_that_fit_no_layout_are_refused(sizes):
    with pytest.raises(ConfigError, match="ColorNet"):
        ColorNet(RULES, *sizes)


def reference_outputs(net: ColorNet, x: torch.Tensor) -> torch.Tensor:
    """One row's outputs [n_outputs], colour by colour (the module docstring's recipe)."""
    shared = net.encode_shared(x[net.shared])  # [D]
    h = [torch.relu(net.encode_color(x[colored]) + shared) for colored in net.colored]
    for mix_self, mix_mean in zip(net.mix_self, net.mix_mean, strict=True):
        mean = sum(h) / len(h)
        h = [h_c + torch.relu(mix_self(h_c) + mix_mean(mean)) for h_c in h]
    pooled = sum(h) / len(h)
    if net.n_outputs == 1:
        return net.value_head(pooled)
    out = torch.zeros(net.n_outputs)
    for h_c, actions in zip(h, net.color_actions, strict=True):
        out[actions] = net.color_head(h_c)
    out[net.deck_actions] = net.deck_head(pooled)
    return out


@pytest.mark.parametrize(("history", "n_outputs", "depth"), [(False, None, 3), (True, 1, 2)])
def test_the_batched_forward_equals_the_colour_by_colour_reference(history, n_outputs, depth):
    torch.manual_seed(0)
    games = states()
    features = encode_history(games) if history else games.encode()
    n_outputs = n_outputs or RULES.n_actions
    net = ColorNet(RULES, features.shape[1], n_outputs, width=16, depth=depth)
    with torch.no_grad():
        for layer in net.modules():  # biases away from zero, so that every term shows
            if isinstance(layer, torch.nn.Linear):
                layer.bias.normal_()
        expected = torch.stack([reference_outputs(net, x) for x in features[:4]])
        torch.testing.assert_close(net(features[:4]), expected)


@pytest.mark.parametrize(("width", "depth"), [(0, 2), (8, 0)])
def test_a_shape_below_one_is_refused_naming_it(width, depth):
    with pytest.raises(ConfigError, match=f"width={width}, depth={depth}"):
        ColorNet(RULES, feature_size(RULES), RULES.n_actions, width=width, depth=depth)


def test_the_smallest_shape_builds():
    net = ColorNet(RULES, feature_size(RULES), RULES.n_actions, width=1, depth=1)
    assert net(states().encode()).shape == (32, RULES.n_actions)


def test_the_value_network_reads_the_history_only_features():
    # encode_history appends what only the whole state shows (the opponent's hand...): a value
    # network that ignored it would value states by the information state alone.
    torch.manual_seed(0)
    history = encode_history(states())
    net = ColorNet(RULES, history.shape[1], 1, width=16, depth=2)
    changed = history.clone()
    changed[:, feature_size(RULES) :] = 1 - changed[:, feature_size(RULES) :]
    assert not torch.allclose(net(changed), net(history))


def test_weights_start_at_the_documented_scales_and_checkpoints_hold_only_weights():
    torch.manual_seed(0)
    width = 256
    net = ColorNet(RULES, feature_size(RULES), RULES.n_actions, width=width, depth=3)
    for layer in [net.encode_color, net.encode_shared, *net.mix_self, *net.mix_mean]:
        assert layer.weight.std().item() == pytest.approx((2 / layer.in_features) ** 0.5, rel=0.05)
        assert not layer.bias.any()
    for head in [net.color_head, net.deck_head]:
        assert head.weight.std().item() == pytest.approx(0.1 / width**0.5, rel=0.1)
    assert set(net.state_dict()) == {name for name, _ in net.named_parameters()}
    value = ColorNet(RULES, feature_size(RULES), 1, width=width, depth=2)
    assert value.value_head.out_features == 1
    assert value.value_head.weight.std().item() == pytest.approx(0.1 / width**0.5, rel=0.15)
