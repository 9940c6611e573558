"""The networks of Deep CFR (Brown, Lerer, Gross & Sandholm, 2019): an MLP over
the information-state encoding (``docs/encoding.md``) with one output per action, and
how a configuration names a network.

The same :class:`PolicyMLP` serves as the advantage network (its raw outputs
estimate each action's advantage; the loss ignores illegal entries) and as the
average-strategy network (its outputs are logits; :func:`masked_softmax` turns
them into a strategy that puts probability exactly 0 on illegal actions).
:func:`masked_softmax`, like
:func:`~lostcities_cfr.cfr.regret_matching.regret_matching`, has the signature
``head(outputs, legal) -> [B, A]``, so either can be handed to the inference
queue as a network's head.

A configuration names a network as a preset (:data:`NetworkPreset`), a
:class:`NetworkConfig` of the MLP, or any ``nn.Module`` class by its ``class_path``
(:data:`NetworkFactory`): :func:`network_factory` turns each into a function of
``(n_features, n_actions)`` that builds a fresh network, and :func:`build_network`
checks that the network it built maps features [B, F] to outputs [B, A].
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.cfr.color_network import ColorNet
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.encoding import BLOCK_ORDER, feature_blocks
from lostcities_cfr.game.rules import Rules

FeatureBlock = Literal[*BLOCK_ORDER]
"""The name of a block of the information-state encoding (``docs/encoding.md``)."""

NetworkFactory = Callable[[int, int], nn.Module]
"""``factory(n_features, n_actions) -> nn.Module``, a freshly initialised network mapping
features [B, F] to one output per action [B, A]. In a config, an ``nn.Module`` class whose
constructor takes those two first: ``{class_path: my_nets.MyNet, init_args: {...}}``."""


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of a network: a :class:`PolicyMLP`, or a colour-equivariant
    :class:`~lostcities_cfr.cfr.color_network.ColorNet`.

    Args:
        width: units in each hidden layer (ColorNet: per colour).
        depth: number of hidden layers.
        layer_norm: a LayerNorm after each hidden Linear (before the ReLU); MLP only.
        residual: hidden layers after the first add their input to their output; MLP only
            (ColorNet's mixing layers always are residual).
        architecture: ``"mlp"`` (a flat MLP) or ``"colors"`` (one shared encoder per colour:
            the rules treat colours alike, so it learns each card's worth once).
        hidden_features: encoding blocks the network never sees (``docs/encoding.md``
            names them: ``turn``, ``pile_draws``, ...), zeroed at its input by
            :class:`HiddenFeatures`; for ablations that ask what a block is worth.
    """

    width: PositiveInt = 512
    depth: PositiveInt = 3
    layer_norm: bool = False
    residual: bool = False
    architecture: Literal["mlp", "colors"] = "mlp"
    hidden_features: tuple[FeatureBlock, ...] = ()

    def __post_init__(self) -> None:
        unknown = [name for name in self.hidden_features if name not in BLOCK_ORDER]
        if unknown:
            raise ConfigError(
                f"NetworkConfig hidden_features: unknown block(s) {unknown}; expected names "
                f"from {list(BLOCK_ORDER)}"
            )
        # a list from a YAML file or a checkpoint's hyperparameters; a tuple keeps it hashable
        object.__setattr__(self, "hidden_features", tuple(self.hidden_features))

    # "512x3" is the reference scale. "1024x6" is twice as wide and deep; at six
    # layers skip connections and LayerNorm keep gradients and activations at a
    # trainable scale, the usual remedy for deeper MLPs.
    PRESETS: ClassVar[dict[str, dict]] = {
        "512x3": {"width": 512, "depth": 3},
        "1024x6": {"width": 1024, "depth": 6, "layer_norm": True, "residual": True},
    }

    @classmethod
    def preset(cls, name: str) -> NetworkConfig:
        """The configuration called ``name`` (see ``NetworkConfig.PRESETS``)."""
        if name not in cls.PRESETS:
            raise ConfigError(
                f"unknown network preset {name!r}; expected one of {sorted(cls.PRESETS)}"
            )
        return cls(**cls.PRESETS[name])

    @property
    def needs_rules(self) -> bool:
        """ColorNet and ``hidden_features`` read Lost Cities' feature blocks: they need its
        rules."""
        return self.architecture == "colors" or bool(self.hidden_features)

    def build(self, n_features: int, n_actions: int, rules: Rules | None = None) -> nn.Module:
        """A freshly initialised network of this shape; ColorNet and ``hidden_features``
        need the ``rules`` the features and outputs follow."""
        if rules is None and self.needs_rules:
            raise ConfigError(
                "a NetworkConfig with architecture='colors' or hidden_features needs the rules"
            )
        if self.architecture == "colors":
            net = ColorNet(rules, n_features, n_actions, self.width, self.depth)
        elif self.architecture == "mlp":
            shape = {k: v for k, v in asdict(self).items() if k in _MLP_FIELDS}
            net = PolicyMLP(n_features, n_actions, **shape)
        else:
            raise ConfigError(
                f"NetworkConfig architecture={self.architecture!r}; expected 'mlp' or 'colors'"
            )
        if not self.hidden_features:
            return net
        blocks = feature_blocks(rules)
        columns = [blocks[name] for name in self.hidden_features]
        return HiddenFeatures(net, torch.cat([torch.arange(c.start, c.stop) for c in columns]))


_MLP_FIELDS = ("width", "depth", "layer_norm", "residual")


class HiddenFeatures(nn.Module):
    """``net`` behind a mask: the feature columns ``hidden`` are zeroed before it sees them.

    An ablation of an encoding block (``NetworkConfig.hidden_features``) this way keeps the
    feature layout, the buffers and every other network of a run unchanged.
    """

    def __init__(self, net: nn.Module, hidden: torch.Tensor) -> None:
        super().__init__()
        self.net = net
        # not persistent: the columns follow from the config, so checkpoints hold weights only
        self.register_buffer("hidden", hidden.long(), persistent=False)

    def reset_parameters(self) -> None:
        reinitialise(self.net)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``net``'s outputs [B, A] for features [B, F] with the hidden columns zeroed."""
        return self.net(features.index_fill(-1, self.hidden, 0.0))


class PolicyMLP(nn.Module):
    """MLP from information-state features to one output per action.

    Hidden layer: ``Linear -> [LayerNorm] -> ReLU``; with ``residual`` every
    hidden layer but the first (which changes the width) adds its input to its
    output. A final Linear maps to the ``n_actions`` outputs.

    Initialisation: the features are small counts in [0, 3] and fractions, most
    of them 0, so no input normalisation is needed; hidden weights use He
    (Kaiming) normal initialisation, which keeps ReLU activations at a stable
    scale, and zero biases. In residual mode each skip adds a branch of the same
    scale, so the branch weights are divided by sqrt(depth) to slow the growth
    of the sum with depth (with LayerNorm the norm sets the branch scale and the
    sum grows only linearly). The output layer is scaled down so that all
    outputs start close to 0: the strategy network starts near uniform and the
    advantage network near "no preference".

    Args:
        n_features: F, the length of the encoding (``feature_size(rules)``: 423
            for classic rules).
        n_actions: A, the number of action ids (``rules.n_actions``: 106 classic).
        width: units in each hidden layer.
        depth: number of hidden layers (at least 1).
        layer_norm: a LayerNorm after each hidden Linear.
        residual: skip connections around the hidden layers after the first.
    """

    @checked
    def __init__(
        self,
        n_features: PositiveInt,
        n_actions: PositiveInt,
        width: PositiveInt = 512,
        depth: PositiveInt = 3,
        layer_norm: bool = False,
        residual: bool = False,
    ) -> None:
        super().__init__()
        self.n_features = n_features
        self.n_actions = n_actions
        self.config = NetworkConfig(width, depth, layer_norm, residual)
        self.hidden = nn.ModuleList(
            nn.Sequential(
                nn.Linear(n_features if i == 0 else width, width),
                nn.LayerNorm(width) if layer_norm else nn.Identity(),
                nn.ReLU(),
            )
            for i in range(depth)
        )
        self.head = nn.Linear(width, n_actions)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every weight (Deep CFR retrains networks from scratch)."""
        for i, layer in enumerate(self.hidden):
            linear = layer[0]
            nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
            if i > 0 and self.config.residual:
                with torch.no_grad():
                    linear.weight.mul_(self.config.depth**-0.5)
            nn.init.zeros_(linear.bias)
            if isinstance(layer[1], nn.LayerNorm):
                layer[1].reset_parameters()
        nn.init.normal_(self.head.weight, std=0.1 / self.config.width**0.5)
        nn.init.zeros_(self.head.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Raw outputs [B, A] for features [B, F]."""
        x = self.hidden[0](features)
        for layer in self.hidden[1:]:
            x = x + layer(x) if self.config.residual else layer(x)
        return self.head(x)


NetworkPreset = Literal[*NetworkConfig.PRESETS]


def network_factory(
    network: NetworkPreset | NetworkConfig | NetworkFactory, rules: Rules | None = None
) -> NetworkFactory:
    """What builds the networks ``network`` names: a preset's or a :class:`NetworkConfig`'s
    :meth:`~NetworkConfig.build` (for ``rules``, which a ColorNet needs), or ``network``
    itself (an ``nn.Module`` class, or any function of ``(n_features, n_actions)``).

    Raises:
        ConfigError: a string that names no preset.
    """
    if isinstance(network, str):
        try:
            network = NetworkConfig.preset(network)
        except ConfigError as error:
            raise ConfigError(
                f"{error}, a NetworkConfig mapping (width, depth, ...) or the class_path of an "
                "nn.Module taking (n_features, n_actions)"
            ) from None
    if isinstance(network, NetworkConfig):
        return functools.partial(network.build, rules=rules)
    if not callable(network):
        raise ConfigError(
            f"network {network!r}; expected a preset, a NetworkConfig or an nn.Module class"
        )
    return network


def build_network(factory: NetworkFactory, n_features: int, n_actions: int) -> nn.Module:
    """A network from ``factory``, checked on a batch of two zero rows: outputs [2, n_actions].

    The check runs in eval mode (no dropout, no batch-norm statistics updated).

    Raises:
        ConfigError: the factory built no ``nn.Module``, or one of other outputs.
    """
    net = factory(n_features, n_actions)
    name = getattr(factory, "__qualname__", type(net).__name__)
    if not isinstance(net, nn.Module):
        raise ConfigError(f"{name}({n_features}, {n_actions}) gave {net!r}; expected an nn.Module")
    mode = net.training
    with torch.no_grad():
        outputs = net.eval()(torch.zeros(2, n_features))
    net.train(mode)
    if not isinstance(outputs, torch.Tensor) or tuple(outputs.shape) != (2, n_actions):
        shape = tuple(outputs.shape) if isinstance(outputs, torch.Tensor) else type(outputs)
        raise ConfigError(
            f"{name}(n_features={n_features}, n_actions={n_actions}) maps features [2, "
            f"{n_features}] to {shape}; expected outputs [2, {n_actions}], one per action"
        )
    return net


def reinitialise(net: nn.Module) -> None:
    """Draw fresh weights for ``net``: its own ``reset_parameters()`` where it has one (as
    :class:`PolicyMLP` does), else that of every submodule which has one (``nn.Linear``,
    ``nn.LayerNorm``, ...)."""
    reset = getattr(net, "reset_parameters", None)
    if callable(reset):
        reset()
        return
    for module in net.modules():
        if module is not net and callable(getattr(module, "reset_parameters", None)):
            module.reset_parameters()


def masked_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Softmax over the legal actions of each row; illegal actions get exactly 0.

    ``logits`` [B, A] float, ``legal`` [B, A] bool. A row with no legal action
    (a finished game) comes back all zeros rather than NaN.
    """
    masked = logits.masked_fill(~legal, torch.finfo(logits.dtype).min)
    # Multiplying by the mask zeroes illegal entries exactly (the softmax of the
    # fill value underflows to 0 except in rows with no legal action at all).
    return torch.softmax(masked, dim=-1) * legal


def masked_log_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [B, A] of :func:`masked_softmax`, computed stably (for losses).

    Illegal entries hold a huge negative number, not ``-inf``, so that ``0 * log p`` of
    an illegal action stays 0 rather than NaN; read only the legal entries.
    """
    return torch.log_softmax(logits.masked_fill(~legal, torch.finfo(logits.dtype).min), dim=-1)
