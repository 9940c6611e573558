"""Reference-engine games in and out of a batch: reference states
(:class:`~lostcities_cfr.game.reference.GameState`) stacked into the batched engine's state
tensors, and a batch read back as them.

:meth:`GameBatch.from_states <lostcities_cfr.game.batched.GameBatch.from_states>` and
:meth:`GameBatch.to_states <lostcities_cfr.game.batched.GameBatch.to_states>` call these.
They move games between the two engines one card at a time in Python, for tests, display
and exact analysis, never on a path that trains or plays; and they see a batch only as
copies per card type (the engine's constructor packs them, its batch-first views unpack
them), so they are apart from the engine, which is its packed state and the rules over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules


class BatchFirstGames(Protocol):
    """What :func:`unstack_states` reads of a batch: :class:`~lostcities_cfr.game.batched.
    GameBatch`'s batch-first views. Named here rather than imported, so that the engine,
    which converts through this module, and this module import one way only."""

    @property
    def rules(self) -> Rules: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def hands(self) -> torch.Tensor: ...  # [B, 2, T]
    @property
    def expeditions(self) -> torch.Tensor: ...  # [B, 2, T]
    @property
    def known(self) -> torch.Tensor: ...  # [B, 2, T]
    @property
    def piles(self) -> torch.Tensor: ...  # [B, C, L]
    @property
    def pile_len(self) -> torch.Tensor: ...  # [B, C]
    @property
    def deck(self) -> torch.Tensor: ...  # [B, N]
    @property
    def deck_pos(self) -> torch.Tensor: ...  # [B]
    @property
    def turn(self) -> torch.Tensor: ...  # [B]
    @property
    def discarded(self) -> torch.Tensor: ...  # [B]


def stack_states(states: Sequence[GameState], z: dict[str, torch.Tensor]) -> None:
    """Write ``states`` (at least one, any point of the round) into ``z``, the tensors of as
    many empty games on the CPU with their cards as copies per type (``GameBatch._zeros``),
    game ``b`` into column ``b``.

    Raises:
        ValueError: the states play different rules.
    """
    rules = states[0].rules
    for i, s in enumerate(states):
        if s.rules != rules:
            raise ValueError(f"states[{i}] has rules {s.rules}, states[0] has {rules}")
    N = rules.deck_size
    for b, s in enumerate(states):
        for p in range(2):
            for t in s.hands[p]:
                z["_hands"][p, t, b] += 1
            for c, ranks in enumerate(s.expeditions[p]):
                for r in ranks:
                    z["_expeditions"][p, rules.type_id(c, r), b] += 1
            z["_known"][p, :, b] = torch.tensor(s.known[p], dtype=torch.int8)
        for c, ranks in enumerate(s.piles):
            z["_piles"][: len(ranks), c, b] = torch.tensor(ranks, dtype=torch.int8)
            z["_pile_len"][c, b] = len(ranks)
        z["_deck_pos"][b] = N - len(s.deck)
        z["_deck"][N - len(s.deck) :, b] = torch.tensor(s.deck, dtype=torch.int8)
        z["_turn"][b] = s.turn
        z["_discarded"][b] = -1 if s.discarded_color is None else s.discarded_color
        z["done"][b] = s.is_terminal


def unstack_states(batch: BatchFirstGames) -> list[GameState]:
    """The games of ``batch``, a batch on the CPU, as reference-engine states."""
    rules, N, R1 = batch.rules, batch.rules.deck_size, batch.rules.n_ranks + 1
    hands, expeditions = batch.hands.tolist(), batch.expeditions.tolist()
    known, piles, pile_len = batch.known.tolist(), batch.piles.tolist(), batch.pile_len.tolist()
    deck = batch.deck.tolist()
    states = []
    for b in range(batch.batch_size):
        discarded = int(batch.discarded[b])
        states.append(
            GameState(
                rules=rules,
                hands=[_expand_counts(hands[b][p]) for p in range(2)],
                expeditions=[
                    [
                        [t % R1 for t in _expand_counts(hands_c)]
                        for hands_c in _split_colors(expeditions[b][p], R1)
                    ]
                    for p in range(2)
                ],
                piles=[piles[b][c][: pile_len[b][c]] for c in range(rules.n_colors)],
                deck=deck[b][int(batch.deck_pos[b]) : N],
                known=known[b],
                turn=int(batch.turn[b]),
                discarded_color=None if discarded < 0 else discarded,
            )
        )
    return states


def _expand_counts(counts: Sequence[int]) -> list[int]:
    """[2, 0, 1] -> [0, 0, 2]: the sorted ids of a per-type count vector."""
    return [t for t, n in enumerate(counts) for _ in range(n)]


def _split_colors(counts: Sequence[int], per_color: int) -> list[Sequence[int]]:
    return [counts[c * per_color : (c + 1) * per_color] for c in range(len(counts) // per_color)]
