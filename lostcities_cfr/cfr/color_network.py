"""A network that treats the five colours alike: one shared per-colour encoder, pooled.

Every rule of Lost Cities treats the colours alike (``game/symmetry.py``), and a round's
score is a sum over colours. A flat MLP over the encoding has to learn what a red 7 is
worth and, separately, what a blue 7 is worth; :class:`ColorNet` learns it once. The
features of each colour (its slice of every per-type block: hand, expeditions, piles,
unseen cards...; its discard pile's sequence; whether it was discarded this turn) go
through one shared encoder, together with the features no colour owns (deck, turn, phase,
seat). Each further layer mixes every colour's embedding with the mean of all of them, so
that colours can compete for the hand's cards and the turns left (a Deep Sets layer,
Zaheer et al., NeurIPS 2017). The outputs keep the symmetry:

- with one output per action, each colour's embedding gives the outputs of that colour's
  actions (play or discard each of its cards, draw its pile) and the mean gives the deck
  draw, so relabelling the colours of the input relabels the outputs the same way
  (equivariance);
- with one output (a value), the mean of the embeddings gives it, so relabelling the
  colours changes nothing (invariance).

The layouts come from :mod:`lostcities_cfr.game.symmetry`, so the network takes the same
flat features ``[B, F]`` (or history features ``[B, H]``) as :class:`PolicyMLP`.
"""

from __future__ import annotations

import torch
from torch import nn

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.encoding import feature_size, history_feature_size
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.game.symmetry import Layout, action_layout, feature_layout


def _per_color(layout: Layout, n_colors: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(colored [C, K], shared [G])``: the indices of each colour's entries, in the same
    order for every colour, and of the entries no colour owns."""
    color, rest = layout.color, layout.rest
    colored = torch.stack(
        [torch.nonzero(color == c).squeeze(1)[rest[color == c].argsort()] for c in range(n_colors)]
    )
    return colored, torch.nonzero(color < 0).squeeze(1)


class ColorNet(nn.Module):
    """A colour-equivariant network over the flat encoding (module docstring).

    Args:
        rules: the rules the features and actions follow.
        n_features: ``feature_size(rules)`` (information states) or
            ``history_feature_size(rules)`` (whole states, for a value network).
        n_outputs: ``rules.n_actions`` (one output per action) or 1 (a value).
        width: embedding units per colour.
        depth: layers (the first encodes each colour, the others mix them).
    """

    def __init__(
        self, rules: Rules, n_features: int, n_outputs: int, width: int = 128, depth: int = 3
    ) -> None:
        super().__init__()
        sizes = {feature_size(rules): False, history_feature_size(rules): True}
        if n_features not in sizes:
            raise ConfigError(
                f"ColorNet n_features={n_features}; {rules.preset_name()} rules have "
                f"{feature_size(rules)} (information state) or "
                f"{history_feature_size(rules)} (history) features"
            )
        if n_outputs not in (1, rules.n_actions):
            raise ConfigError(
                f"ColorNet n_outputs={n_outputs}; expected {rules.n_actions} (one per action) "
                "or 1 (a value)"
            )
        if width < 1 or depth < 1:
            raise ConfigError(f"ColorNet width={width}, depth={depth}; both must be at least 1")
        C = rules.n_colors
        colored, shared = _per_color(feature_layout(rules, history=sizes[n_features]), C)
        self.register_buffer("colored", colored, persistent=False)  # [C, K]
        self.register_buffer("shared", shared, persistent=False)  # [G]
        self.n_outputs = n_outputs
        K, G = colored.shape[1], len(shared)
        self.encode_color = nn.Linear(K, width)
        self.encode_shared = nn.Linear(G, width)
        self.mix_self = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 1))
        self.mix_mean = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 1))
        if n_outputs == 1:
            self.value_head = nn.Linear(width, 1)
        else:
            color_actions, deck_actions = _per_color(action_layout(rules), C)
            self.register_buffer("color_actions", color_actions, persistent=False)  # [C, Ka]
            self.register_buffer("deck_actions", deck_actions, persistent=False)  # [Ga]
            self.color_head = nn.Linear(width, color_actions.shape[1])
            self.deck_head = nn.Linear(width, len(deck_actions))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """He initialisation of the hidden layers, small outputs (as :class:`PolicyMLP`)."""
        for layer in [self.encode_color, self.encode_shared, *self.mix_self, *self.mix_mean]:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
        heads = [self.value_head] if self.n_outputs == 1 else [self.color_head, self.deck_head]
        for head in heads:
            nn.init.normal_(head.weight, std=0.1 / head.in_features**0.5)
            nn.init.zeros_(head.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Outputs [B, n_outputs] for features [B, n_features]."""
        per_color = features[:, self.colored]  # [B, C, K]
        shared = self.encode_shared(features[:, self.shared])  # [B, D]
        h = torch.relu(self.encode_color(per_color) + shared[:, None])  # [B, C, D]
        for mix_self, mix_mean in zip(self.mix_self, self.mix_mean, strict=True):
            # Residual, so that deeper stacks start close to the shallower ones.
            h = h + torch.relu(mix_self(h) + mix_mean(h.mean(1, keepdim=True)))
        pooled = h.mean(1)  # [B, D]
        if self.n_outputs == 1:
            return self.value_head(pooled)
        out = features.new_zeros(len(features), self.n_outputs)
        B = len(features)
        out[:, self.color_actions.view(-1)] = self.color_head(h).view(B, -1)
        out[:, self.deck_actions] = self.deck_head(pooled)
        return out
