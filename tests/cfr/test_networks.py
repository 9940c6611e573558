from dataclasses import asdict

import pytest
import torch
from torch import nn

from lostcities_cfr.cfr import NetworkConfig, PolicyMLP, masked_softmax
from lostcities_cfr.cfr.color_network import ColorNet
from lostcities_cfr.cfr.networks import (
    build_network,
    masked_log_softmax,
    network_factory,
    reinitialise,
)
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game import Rules, feature_size
from lostcities_cfr.game.encoding import feature_blocks, history_feature_size

CLASSIC = Rules.classic()
F, A = feature_size(CLASSIC), CLASSIC.n_actions


def count_features(batch: int, seed: int = 0) -> torch.Tensor:
    """Features like the encoding's: small counts in [0, 3], mostly zeros."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 4, (batch, F), generator=g).float()
    return counts * (torch.rand(batch, F, generator=g) < 0.3)


def random_legal(batch: int, n_actions: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, n_actions, generator=g) < 0.4


@pytest.mark.parametrize("preset", ["512x3", "1024x6"])
def test_presets_map_features_to_one_output_per_action(preset):
    net = NetworkConfig.preset(preset).build(F, A)
    assert net(count_features(5)).shape == (5, A)


def test_512x3_has_the_parameter_count_of_three_hidden_layers_of_512():
    net = NetworkConfig.preset("512x3").build(F, A)
    expected = (F * 512 + 512) + 2 * (512 * 512 + 512) + (512 * A + A)
    assert sum(p.numel() for p in net.parameters()) == expected == 796_778


def test_1024x6_preset_is_residual_with_layer_norm():
    config = NetworkConfig.preset("1024x6")
    assert (config.width, config.depth, config.layer_norm, config.residual) == (1024, 6, True, True)
    net = config.build(F, A)
    assert sum(isinstance(m, nn.LayerNorm) for m in net.modules()) == 6


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match="512x3"):
        NetworkConfig.preset("256x2")


def test_depth_below_one_is_refused():
    with pytest.raises(ConfigError, match="depth=0"):
        PolicyMLP(F, A, depth=0)


def test_residual_layers_add_their_input_to_their_output():
    torch.manual_seed(0)
    net = PolicyMLP(12, 5, width=8, depth=3, residual=True)
    x = count_features(4)[:, :12]
    h = net.hidden[0](x)
    h = h + net.hidden[1](h)
    h = h + net.hidden[2](h)
    torch.testing.assert_close(net(x), net.head(h))


def test_plain_layers_have_no_skip():
    torch.manual_seed(0)
    net = PolicyMLP(12, 5, width=8, depth=3)
    x = count_features(4)[:, :12]
    torch.testing.assert_close(net(x), net.head(net.hidden[2](net.hidden[1](net.hidden[0](x)))))


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_outputs_start_small_so_strategies_start_near_uniform(layer_norm, residual):
    torch.manual_seed(0)
    net = PolicyMLP(F, A, width=256, depth=6, layer_norm=layer_norm, residual=residual)
    with torch.no_grad():
        outputs = net(count_features(256))
    assert outputs.isfinite().all()
    assert outputs.std() < 0.5


def test_reset_parameters_draws_new_weights():
    torch.manual_seed(0)
    net = PolicyMLP(F, A, width=32, depth=2)
    before = [p.clone() for p in net.parameters()]
    net.reset_parameters()
    assert not torch.equal(before[0], net.hidden[0][0].weight)


def test_masked_softmax_is_the_softmax_over_legal_actions_only():
    logits = torch.tensor([[1.0, 50.0, 2.0, 0.5]])
    legal = torch.tensor([[True, False, True, True]])
    strategy = masked_softmax(logits, legal)
    expected = torch.softmax(torch.tensor([1.0, 2.0, 0.5]), dim=0)
    torch.testing.assert_close(strategy[0, [0, 2, 3]], expected)
    assert strategy[0, 1] == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_masked_softmax_puts_exactly_zero_on_illegal_actions(dtype):
    g = torch.Generator().manual_seed(1)
    logits = (torch.randn(64, A, generator=g) * 30).to(dtype)
    legal = random_legal(64, A, seed=1)
    legal[:, 0] = True
    strategy = masked_softmax(logits, legal)
    assert (strategy[~legal] == 0).all()
    torch.testing.assert_close(
        strategy.float().sum(-1),
        torch.ones(64),
        atol=1e-2 if dtype != torch.float32 else 1e-6,
        rtol=0,
    )


def test_masked_softmax_of_a_row_without_legal_actions_is_all_zero():
    strategy = masked_softmax(torch.randn(2, 4), torch.tensor([[False] * 4, [True] * 4]))
    assert torch.equal(strategy[0], torch.zeros(4))
    torch.testing.assert_close(strategy[1].sum(), torch.tensor(1.0))


@pytest.mark.parametrize("residual", [False, True])
def test_weights_start_at_the_documented_scales(residual):
    # He initialisation (std sqrt(2 / fan_in)), residual branches after the first divided by
    # sqrt(depth), zero biases, and an output layer of std 0.1 / sqrt(width).
    torch.manual_seed(0)
    width, depth = 256, 4
    net = PolicyMLP(F, A, width=width, depth=depth, residual=residual)
    for i, layer in enumerate(net.hidden):
        linear = layer[0]
        expected = (2 / linear.in_features) ** 0.5 * (depth**-0.5 if residual and i > 0 else 1)
        assert linear.weight.std().item() == pytest.approx(expected, rel=0.03)
        assert not linear.bias.any()
    assert net.head.weight.std().item() == pytest.approx(0.1 / width**0.5, rel=0.03)
    assert not net.head.bias.any()


def test_colors_architecture_builds_a_colour_network_of_that_shape():
    config = NetworkConfig(width=16, depth=3, architecture="colors")
    rules = Rules.classic()
    net = config.build(F, A, rules)
    assert isinstance(net, ColorNet)
    assert (net.encode_color.out_features, len(net.mix_self)) == (16, 2)
    assert net(count_features(3)).shape == (3, A)
    value = config.build(history_feature_size(rules), 1, rules)
    assert value(torch.zeros(2, history_feature_size(rules))).shape == (2, 1)


def test_colors_architecture_without_rules_is_refused():
    with pytest.raises(ConfigError, match="architecture='colors' or hidden_features needs"):
        NetworkConfig(width=16, depth=2, architecture="colors").build(F, A)
    with pytest.raises(ConfigError, match="hidden_features needs the rules"):
        NetworkConfig(width=16, depth=2, hidden_features=("turn",)).build(F, A)


@pytest.mark.parametrize("architecture", ["mlp", "colors"])
def test_hidden_features_are_invisible_and_every_other_feature_counts(architecture):
    blocks = feature_blocks(CLASSIC)
    config = NetworkConfig(width=16, depth=2, architecture=architecture)
    blind = NetworkConfig(**{**asdict(config), "hidden_features": ("turn", "pile_draws")})
    torch.manual_seed(0)
    net = blind.build(F, A, CLASSIC)
    features = count_features(4)
    for name, block in blocks.items():
        changed = features.clone()
        changed[:, block] += 1.0
        moved = not torch.equal(net(changed), net(features))
        assert moved == (name not in ("turn", "pile_draws")), name
    # the same weights as the plain network, which does see the hidden blocks
    torch.manual_seed(0)
    plain = config.build(F, A, CLASSIC)
    assert net.state_dict().keys() == {f"net.{k}" for k in plain.state_dict()}
    assert torch.equal(net(features), plain(features.index_fill(1, net.hidden, 0.0)))


def test_hidden_features_reach_the_value_network_history_input():
    rules = CLASSIC
    net = NetworkConfig(width=8, depth=1, hidden_features=("turn",)).build(
        history_feature_size(rules), 1, rules
    )
    history = torch.zeros(2, history_feature_size(rules))
    changed = history.clone()
    changed[:, feature_blocks(rules)["turn"]] = 5.0
    assert torch.equal(net(history), net(changed))
    changed[:, -1] = 5.0  # the deck's contents, past the information-state features
    assert not torch.equal(net(history), net(changed))


def test_an_unknown_hidden_feature_is_refused_with_the_known_names():
    with pytest.raises(ConfigError, match=r"unknown block\(s\) \['turns'\].*'pile_draws'"):
        NetworkConfig(hidden_features=("turns",))


def test_hidden_features_reinitialise_through_the_inner_networks_own_reset():
    net = NetworkConfig(width=8, depth=2, hidden_features=["seat"]).build(F, A, CLASSIC)
    assert net.hidden.tolist() == [feature_blocks(CLASSIC)["seat"].start]
    before = net.net.head.weight.clone()
    reinitialise(net)
    after = net.net.head.weight
    assert not torch.equal(before, after)
    assert after.std() < 0.1 / 8**0.5 * 2  # PolicyMLP's small head, not nn.Linear's default


def test_network_factory_reads_presets_configs_and_classes():
    mlp = network_factory("512x3")(F, A)
    assert isinstance(mlp, PolicyMLP) and (mlp.config.width, mlp.config.depth) == (512, 3)
    colors = network_factory(NetworkConfig(width=8, depth=2, architecture="colors"), CLASSIC)
    assert isinstance(colors(F, A), ColorNet)
    assert network_factory(nn.Linear) is nn.Linear


@pytest.mark.parametrize(
    ("network", "named"),
    [("256x2", r"'256x2'.*512x3.*class_path"), (42, "network 42; expected a preset")],
)
def test_network_factory_refuses_what_builds_no_network(network, named):
    with pytest.raises(ConfigError, match=named):
        network_factory(network)


def test_build_network_checks_one_output_per_action_and_keeps_the_mode():
    net = build_network(lambda f, a: nn.Sequential(nn.Linear(f, a), nn.Dropout(0.5)), F, A)
    assert net.training  # checked in eval mode, handed back as built
    with pytest.raises(ConfigError, match=rf"maps features \[2, {F}\] to \(2, 7\).*\[2, {A}\]"):
        build_network(lambda f, a: nn.Linear(f, 7), F, A)
    with pytest.raises(ConfigError, match=r"gave 3; expected an nn\.Module"):
        build_network(lambda f, a: 3, F, A)


def test_reinitialise_uses_the_networks_own_reset_or_its_layers():
    torch.manual_seed(0)
    own = PolicyMLP(F, A, width=16, depth=2)
    with torch.no_grad():
        own.head.bias.fill_(1.0)
    reinitialise(own)
    assert not own.head.bias.any()  # PolicyMLP.reset_parameters zeroes the biases
    plain = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    before = [p.clone() for p in plain.parameters()]
    reinitialise(plain)
    assert all(not torch.equal(b, p) for b, p in zip(before, plain.parameters(), strict=True))


def test_masked_log_softmax_is_the_log_of_masked_softmax_and_finite_off_the_mask():
    logits = torch.randn(6, A, generator=torch.Generator().manual_seed(0))
    legal = random_legal(6, A)
    log_p = masked_log_softmax(logits, legal)
    torch.testing.assert_close(log_p.exp() * legal, masked_softmax(logits, legal))
    assert bool(log_p.isfinite().all())
    assert float((masked_softmax(logits, legal) * log_p).sum()) == pytest.approx(
        float((masked_softmax(logits, legal)[legal] * log_p[legal]).sum())
    )
