"""The colour symmetry of Lost Cities: relabelling the colours maps a game onto an equal one.

Every rule treats the colours alike, so a deal whose colours are permuted by ``pi`` plays
out exactly as the original when every action is relabelled the same way: the same
scores, the same legal actions (relabelled), the same information states (relabelled).
Training rows can therefore be multiplied by the ``C!`` relabellings (120 for classic
rules) for free: :func:`permute_rows` relabels the features, legal masks and per-action
targets of a batch together, with an independent random permutation per row.

A relabelling moves an index ``j`` of a feature or action vector to
``rest[j] + stride[j] * pi[color[j]]``, where ``color[j]`` is the colour the entry belongs
to (-1: none, the entry stays) and ``stride`` the distance between colours in its block;
:func:`feature_layout` and :func:`action_layout` give these three vectors.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from lostcities_cfr.game.encoding import feature_blocks, history_feature_size
from lostcities_cfr.game.rules import Rules

# Feature blocks with one entry per card type (colour-major, ``n_ranks + 1`` per colour).
_TYPE_BLOCKS = (
    "hand",
    "own_expeditions",
    "opp_expeditions",
    "pile_counts",
    "pile_tops",
    "opp_known",
    "unseen",
)


class Layout(NamedTuple):
    """Where each entry of a vector goes under a colour permutation (module docstring)."""

    color: torch.Tensor  # [n] int64: the entry's colour, -1 for none
    stride: torch.Tensor  # [n] int64
    rest: torch.Tensor  # [n] int64: the entry's index with its colour set to 0

    def index(self, permutation: torch.Tensor) -> torch.Tensor:
        """[B, n]: the index each entry moves to under each row's ``permutation`` [B, C]."""
        color = self.color.clamp(min=0).expand(len(permutation), -1)  # [B, n]
        moved = self.rest + self.stride * permutation.gather(1, color)
        return torch.where(self.color >= 0, moved, torch.arange(len(self.color)))


def _layout(entries: list[tuple[int, int, int]]) -> Layout:
    color, stride, rest = (
        torch.tensor(column, dtype=torch.int64) for column in zip(*entries, strict=True)
    )
    return Layout(color, stride, rest)


def _type_entries(rules: Rules, start: int) -> list[tuple[int, int, int]]:
    """(colour, stride, rest) of a block of one entry per card type starting at ``start``."""
    R1 = rules.n_ranks + 1
    return [(t // R1, R1, start + t % R1) for t in range(rules.n_types)]


def feature_layout(rules: Rules, history: bool = False) -> Layout:
    """The layout of the information-state features (``encode``), or with ``history`` of
    the history features (``encode_history``: two more type blocks at the end)."""
    blocks = feature_blocks(rules)
    C, L = rules.n_colors, rules.pile_capacity
    entries: list[tuple[int, int, int]] = []
    for name, block in blocks.items():
        if name in _TYPE_BLOCKS:
            entries += _type_entries(rules, block.start)
        elif name == "pile_sequence":
            entries += [(i // L, L, block.start + i % L) for i in range(C * L)]
        elif name == "discarded_color":  # C colours, then "none", which stays
            entries += [(c, 1, block.start) for c in range(C)] + [(-1, 0, block.start + C)]
        else:
            entries += [(-1, 0, j) for j in range(block.start, block.stop)]
    if history:
        F = len(entries)
        entries += _type_entries(rules, F) + _type_entries(rules, F + rules.n_types)
        assert len(entries) == history_feature_size(rules)
    return _layout(entries)


def action_layout(rules: Rules) -> Layout:
    """The layout of action ids: ``play(t)``, ``discard(t)``, ``draw_deck``, ``draw_pile(c)``."""
    T, C = rules.n_types, rules.n_colors
    entries = _type_entries(rules, 0) + _type_entries(rules, T)
    entries.append((-1, 0, 2 * T))
    entries += [(c, 1, 2 * T + 1) for c in range(C)]
    return _layout(entries)


def random_permutations(
    n: int, n_colors: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """[n, C] int64: an independent uniformly random permutation of the colours per row."""
    keys = torch.rand(n, n_colors, generator=generator)
    return keys.argsort(dim=1)


def permute(values: torch.Tensor, layout: Layout, permutation: torch.Tensor) -> torch.Tensor:
    """``values`` [B, n] with each row's entries moved as its ``permutation`` [B, C] says."""
    out = torch.empty_like(values)
    return out.scatter_(1, layout.index(permutation).to(values.device), values)


def permute_features(
    features: torch.Tensor, layout: Layout, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Feature rows [B, F] relabelled by an independent random colour permutation per row."""
    n_colors = int(layout.color.max()) + 1
    return permute(features, layout, random_permutations(len(features), n_colors, generator))


def permute_rows(
    features: torch.Tensor,
    legal: torch.Tensor,
    targets: torch.Tensor,
    feature_map: Layout,
    actions: Layout,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training rows relabelled by an independent random colour permutation per row.

    ``features`` [B, F] (laid out as ``feature_map``), ``legal`` [B, A] and per-action
    ``targets`` [B, A] are relabelled together.
    """
    n_colors = int(actions.color.max()) + 1
    permutation = random_permutations(len(features), n_colors, generator)
    return (
        permute(features, feature_map, permutation),
        permute(legal, actions, permutation),
        permute(targets, actions, permutation),
    )
