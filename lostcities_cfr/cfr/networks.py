"""The networks of Deep CFR (Brown, Lerer, Gross & Sandholm, 2019): an MLP over
the information-state encoding (``docs/encoding.md``) with one output per action.

The same :class:`PolicyMLP` serves as the advantage network (its raw outputs
estimate each action's advantage; the loss ignores illegal entries) and as the
average-strategy network (its outputs are logits; :func:`masked_softmax` turns
them into a strategy that puts probability exactly 0 on illegal actions).
:func:`masked_softmax`, like
:func:`~lostcities_cfr.cfr.regret_matching.regret_matching`, has the signature
``head(outputs, legal) -> [B, A]``, so either can be handed to the inference
queue as a network's head.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import torch
from torch import nn

from lostcities_cfr.errors import ConfigError


@dataclass(frozen=True)
class NetworkConfig:
    """Shape of a :class:`PolicyMLP`; every field is a constructor argument of it.

    Args:
        width: units in each hidden layer.
        depth: number of hidden layers.
        layer_norm: a LayerNorm after each hidden Linear (before the ReLU).
        residual: hidden layers after the first add their input to their output.
    """

    width: int = 512
    depth: int = 3
    layer_norm: bool = False
    residual: bool = False

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

    def build(self, n_features: int, n_actions: int) -> PolicyMLP:
        """A freshly initialised network of this shape."""
        return PolicyMLP(n_features, n_actions, **asdict(self))


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

    def __init__(
        self,
        n_features: int,
        n_actions: int,
        width: int = 512,
        depth: int = 3,
        layer_norm: bool = False,
        residual: bool = False,
    ) -> None:
        super().__init__()
        for name, value in (
            ("n_features", n_features),
            ("n_actions", n_actions),
            ("width", width),
            ("depth", depth),
        ):
            if value < 1:
                raise ConfigError(f"PolicyMLP {name}={value}; it must be at least 1")
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
