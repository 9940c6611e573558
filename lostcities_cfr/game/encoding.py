"""The information-state feature vector (``docs/encoding.md``): its layout and the
batched encoder.

Both engines build their features block by block in the order of
:func:`feature_blocks`; sharing this one table keeps them in step. The reference
engine encodes one game (``GameState.encode``); :func:`encode_batch` encodes every
game of a :class:`~lostcities_cfr.game.batched.GameBatch` at once
(``GameBatch.encode`` calls it).
"""

from __future__ import annotations

from functools import cache
from typing import Protocol

import torch

from lostcities_cfr.game.fused import compiled_on
from lostcities_cfr.game.packed import lookup_tables, unpack_into
from lostcities_cfr.game.rules import Rules


class PackedGames(Protocol):
    """What the encoders read of a batch of games: :class:`~lostcities_cfr.game.batched.
    GameBatch`'s packed state (``game/packed.py``). Named here rather than imported, so that
    the engine, which encodes through this module, and this module import one way only."""

    @property
    def rules(self) -> Rules: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def compiled(self) -> bool: ...
    @property
    def current_player(self) -> torch.Tensor: ...  # [B]
    @property
    def hands(self) -> torch.Tensor: ...  # [B, 2, T]

    _turn: torch.Tensor
    _deck_pos: torch.Tensor
    _discarded: torch.Tensor
    _hand_known: torch.Tensor
    _pile_len: torch.Tensor
    _piles: torch.Tensor
    _played: torch.Tensor

    def encode(self) -> torch.Tensor: ...


BLOCK_ORDER = (
    "hand",
    "own_expeditions",
    "opp_expeditions",
    "pile_counts",
    "pile_tops",
    "pile_sequence",
    "opp_known",
    "unseen",
    "deck_fraction",
    "turn",
    "pile_draws",
    "phase",
    "to_move",
    "seat",
    "discarded_color",
)


def feature_blocks(rules: Rules) -> dict[str, slice]:
    """Name -> slice of each block in the feature vector."""
    T, C, L = rules.n_types, rules.n_colors, rules.pile_capacity
    sizes = {
        "hand": T,
        "own_expeditions": T,
        "opp_expeditions": T,
        "pile_counts": T,
        "pile_tops": T,
        "pile_sequence": C * L,
        "opp_known": T,
        "unseen": T,
        "deck_fraction": 1,
        "turn": 1,
        "pile_draws": 1,
        "phase": 2,
        "to_move": 1,
        "seat": 1,
        "discarded_color": C + 1,
    }
    blocks, start = {}, 0
    for name in BLOCK_ORDER:
        blocks[name] = slice(start, start + sizes[name])
        start += sizes[name]
    return blocks


def feature_size(rules: Rules) -> int:
    """F = 7T + C*L + C + 8 (423 for classic rules)."""
    return feature_blocks(rules)["discarded_color"].stop


def encode_batch(batch: PackedGames, player: torch.Tensor | None = None) -> torch.Tensor:
    """[B, F] float32 features of every game of ``batch`` for ``player`` ([B]; default:
    the player to move), read from the batch's packed state (``game/batched.py``).

    Built feature-major ([F, B], batch-last like the state); the result is the
    transposed view, which matrix multiplies read without a copy (BLAS takes
    the transpose as a flag). Call ``.contiguous()`` if you need row-major rows.
    """
    rules, B = batch.rules, batch.batch_size
    T, C, R1, L = rules.n_types, rules.n_colors, rules.n_ranks + 1, rules.pile_capacity
    tables = lookup_tables(rules, batch.device)
    blocks = _feature_blocks(rules)
    bits = batch._turn.to(torch.int8).bitwise_and_(3)  # [B] bit 0: phase, bit 1: player to move
    to_move = bits >> tables.one
    viewer = to_move if player is None else player.to(torch.int8)
    # Every block but two is a small count: build them all in int8 ([F, B]) and convert
    # once; one-hot blocks come from logical_not of a difference (int8 ``==`` only
    # vectorises between same-shape tensors).
    feat = torch.empty(feature_size(rules), B, dtype=torch.int8, device=batch.device)

    def block(name: str) -> torch.Tensor:
        return feat[blocks[name]]

    def viewer_first(state: torch.Tensor, own: torch.Tensor, opponent: torch.Tensor) -> None:
        """``own`` / ``opponent`` = the viewer's / the other player's row of ``state``.

        Arithmetic select (``s0 + (s1 - s0) * p``): on CPU about five times faster
        than ``torch.where`` with a broadcast condition.
        """
        own_minus_0 = (state[1] - state[0]).mul_(viewer.to(state.dtype))
        torch.add(state[0], own_minus_0, out=own)
        torch.sub(state[1], own_minus_0, out=opponent)

    # both expeditions, unpacked from [2, C, B] into their adjacent blocks
    played = torch.empty_like(batch._played)  # [2, C, B] the viewer's first
    viewer_first(batch._played, played[0], played[1])
    own_and_opp = feat[blocks["own_expeditions"].start : blocks["opp_expeditions"].stop]
    unpack_into(tables, played, own_and_opp.view(2, C, R1, B))
    # the packed hands and public copies: the viewer's hand, the opponent's public copies
    viewer_first(batch._hand_known, block("hand"), block("opp_known"))
    block("hand").bitwise_and_(tables.hand_bits)
    block("opp_known").bitwise_right_shift_(tables.known_shift)

    # pile_sequence holds rank index + 1 in the occupied slots, 0 above
    in_pile = (batch._pile_len.view(C, 1, B) - tables.slots).clamp_(0, 1)  # [C, L + 1, B]
    sequence = block("pile_sequence").view(C, L, B)
    torch.addcmul(in_pile[:, :L], batch._piles.transpose(0, 1), in_pile[:, :L], out=sequence)
    counts = sequence.view(C, L, 1, B) - tables.rank_ids.view(R1, 1)  # [C, L, R1, B]
    torch.logical_not(counts, out=counts.view(torch.bool))
    torch.sum(counts, 1, dtype=torch.int8, out=block("pile_counts").view(C, R1, B))
    on_top = in_pile[:, :L] - in_pile[:, 1:]  # [C, L, B] 1 at the top slot
    top = (sequence * on_top).sum(1, dtype=torch.int8).view(C, 1, B)  # 0: empty pile
    tops = top - tables.rank_ids.view(R1, 1)  # [C, R1, B]
    torch.logical_not(tops, out=block("pile_tops").view(C, R1, B).view(torch.bool))
    # unseen = copies - (hand + own + opponent's expeditions + piles) - known opponent cards
    seen = feat[: 4 * T].view(4, T, B).sum(0, dtype=torch.int8)
    torch.sub(tables.copies, seen, out=block("unseen")).sub_(block("opp_known"))

    phase = bits & tables.one
    torch.logical_not(phase - tables.phases, out=block("phase").view(torch.bool))
    torch.eq(viewer, to_move, out=block("to_move").view(torch.bool).view(B))
    torch.logical_not(viewer, out=block("seat").view(torch.bool).view(B))
    discarded = batch._discarded - tables.discard_ids  # [C + 1, B]
    torch.logical_not(discarded, out=block("discarded_color").view(torch.bool))

    out = feat.to(torch.float32)
    out[blocks["pile_sequence"]] /= tables.rank_divisor
    # deck_fraction: (deck_pos - N) / -(N - 2H), the cards left over the cards after the
    # deal; turn / (2 D) and pile draws / D, with D = N - 2H the cards dealt to the deck: a
    # round without pile draws ends with both near 1 and 0. Pile draws = completed turns (a
    # draw each) - deck draws so far; both let a network tell a pile-trading loop from a
    # round. Three adjacent blocks, divided at once (int32 counts, exact in float32).
    deck_pos, turn = batch._deck_pos, batch._turn  # [B] int32 each
    counts = torch.stack(
        [deck_pos - rules.deck_size, turn, (turn >> 1) - (deck_pos - 2 * rules.hand_size)]
    )  # [3, B]
    counted = slice(blocks["deck_fraction"].start, blocks["pile_draws"].stop)
    torch.div(counts, tables.count_divisors, out=out[counted])
    return out.t()


def history_feature_size(rules: Rules) -> int:
    """H = F + 2T: the player to move's features, the opponent's hand and the deck's contents."""
    return feature_size(rules) + 2 * rules.n_types


def encode_history(batch: PackedGames) -> torch.Tensor:
    """[B, H] float32 features of the whole state, for a history value network.

    The information state of the player to move (:meth:`GameBatch.encode`), then the
    opponent's hand (copies per type) and the deck's contents (copies per type, in no
    order): everything but the deck's order, which no player may condition on.
    """
    if batch.compiled:
        return compiled_on(batch, _encode_history)
    return _encode_history(batch)


def _encode_history(batch: PackedGames) -> torch.Tensor:
    rules = batch.rules
    blocks = feature_blocks(rules)
    features = batch.encode()  # [B, F]
    opponent = (1 - batch.current_player).view(-1, 1, 1).expand(-1, 1, rules.n_types)
    opponent_hand = batch.hands.gather(1, opponent).squeeze(1).float()  # [B, T]
    # unseen = deck + the opponent's hand - its public copies
    deck = features[:, blocks["unseen"]] - opponent_hand + features[:, blocks["opp_known"]]
    return torch.cat([features, opponent_hand, deck], dim=1)


_feature_blocks = cache(feature_blocks)
