"""The packed state of the batched engine: bit layouts, lookup tables and flat offsets.

:class:`~lostcities_cfr.game.batched.GameBatch` (which documents the state it packs)
and the batched encoder (:mod:`lostcities_cfr.game.encoding`) share these: how a hand
and its public copies share one int8 (``KNOWN``), how an expedition packs into one
integer (``WAGER_BITS``), the constant tensors of one rules variant on one device
(:func:`lookup_tables`), the flat-index offsets of one batch size (:func:`flat_offsets`),
and the conversions between packed expeditions and copies per card type.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import torch

from lostcities_cfr.game.rules import Rules

# ``_hand_known`` = hand copies + KNOWN * public copies: a hand holds at most
# ``n_wagers`` <= 5 copies of a type, so both counts fit one int8. Public copies are part
# of the hand, so the value is non-zero exactly when the hand holds the type (legal_mask
# reads it as it is).
KNOWN = 8
# ``_played``: the wager count in the low WAGER_BITS bits (n_wagers <= 5), then one bit
# per rank index 1..R (each number card exists once)
WAGER_BITS = 3


def played_dtype(rules: Rules) -> torch.dtype:
    return torch.int16 if WAGER_BITS + rules.n_ranks < 16 else torch.int32


@dataclass(frozen=True)
class Tables:
    """Constant lookup tensors of one rules variant on one device (batch-last shapes)."""

    play_key: torch.Tensor  # [C, R + 1, 1] int8: 1 for a wager, 2r for rank index r
    face: torch.Tensor  # [R + 1, 1] int64 face value per rank index
    rank_index: torch.Tensor  # [R + 1, 1] int8
    rank_ids: torch.Tensor  # [R + 1] int8: 1..R+1, a rank index plus one as pile_sequence holds it
    slots: torch.Tensor  # [L + 1, 1] int8: 0..L
    copies: torch.Tensor  # [T, 1] int8
    colors: torch.Tensor  # [C, 1] int8
    discard_ids: torch.Tensor  # [C + 1, 1] int8: 0..C-1 then -1 ("no discard"), as in the features
    phases: torch.Tensor  # [2, 1] int8: 0, 1
    # [] int8 operands: a Python scalar in int8 arithmetic takes a slower (unvectorised) path
    zero: torch.Tensor
    one: torch.Tensor
    hand_bits: torch.Tensor  # KNOWN - 1: ``_hand_known & hand_bits`` is the hand
    known_shift: torch.Tensor  # log2(KNOWN): ``_hand_known >> known_shift`` the public copies
    full_deck: torch.Tensor  # [N] int8, sorted
    # The encoding's divisors, float32 on the device: on CUDA, a Python scalar divisor is
    # applied as a multiplication by its reciprocal, off by an ulp from the CPU's division;
    # a device tensor divisor divides exactly on both, so features are equal bit for bit.
    rank_divisor: torch.Tensor  # [1]: R + 1, of pile_sequence
    # [3, 1]: 2H - N, 2D, D (D = N - 2H the cards dealt to the deck), of the adjacent
    # deck_fraction, turn and pile_draws blocks
    count_divisors: torch.Tensor
    # ``_played`` packs an expedition into one integer: the wagers in the low WAGER_BITS
    # bits, then one bit per rank index 1..R; ``played >> shift & mask`` unpacks it
    played_shift: torch.Tensor  # [R + 1, 1]
    played_mask: torch.Tensor  # [R + 1, 1]
    # Per action lookups (integer division is not vectorised on CPU), with one more entry,
    # action A, that does nothing: step gives it to finished games. The eight int8 effects of
    # ACTION8 are packed into one int64, so that a batch decodes with one index_select
    # (along dim 0: index_select along dim 1 of an [8, A] table was 20 times slower).
    action_effects: torch.Tensor  # [A + 1] int64
    action_played: torch.Tensor  # [A + 1]: what a play adds to its ``_played`` entry, 0 otherwise


# the int8 fields of Tables.action_effects: what one action does (0 for the no-op but
# "discarded")
ACTION8 = (
    "discarded",  # the colour a discard leaves, -1 otherwise
    "deck",  # 1 for the deck draw
    "pile",  # 1 for a pile draw
    "pile_len",  # change of the pile's length: +1 discard, -1 pile draw
    "hand",  # change of the player's hand at the card taken or given: -1 play/discard, +1 draw
    "card",  # 1 for play or discard
    "play_rank",  # rank index of the card played, 0 otherwise
    "discard_rank",  # rank index of the card discarded, 0 otherwise
)


def action_kinds(rules: Rules) -> list[tuple[int, int, int]]:
    """(kind, colour, type) of actions 0..A: kind 0 play, 1 discard, 2 deck, 3 pile, 4 none."""
    T, C, R1 = rules.n_types, rules.n_colors, rules.n_ranks + 1
    cards = [(t // R1, t) for t in range(T)]
    return [
        *((0, c, t) for c, t in cards),
        *((1, c, t) for c, t in cards),
        (2, 0, 0),
        *((3, c, c * R1) for c in range(C)),  # a pile draw's type: its colour's wager + the top
        (4, 0, 0),
    ]


@cache
def lookup_tables(rules: Rules, device: torch.device) -> Tables:
    C, R1, T = rules.n_colors, rules.n_ranks + 1, rules.n_types
    dealt = rules.deck_size - 2 * rules.hand_size
    ranks = torch.arange(T, device=device) % R1
    # A card is playable iff play_key > 2 * top, where top is the highest rank index in
    # the expedition (0: empty or wagers only): a number card must beat the top, a wager
    # (key 1) needs top == 0. One comparison instead of two.
    play_key = torch.where(ranks == 0, 1, 2 * ranks).to(torch.int8)
    actions = action_kinds(rules)
    fields = {
        "discarded": [c if k == 1 else -1 for k, c, _ in actions],
        "deck": [k == 2 for k, _, _ in actions],
        "pile": [k == 3 for k, _, _ in actions],
        "pile_len": [(k == 1) - (k == 3) for k, _, _ in actions],
        "hand": [-1 if k < 2 else int(k < 4) for k, _, _ in actions],
        "card": [k < 2 for k, _, _ in actions],
        "play_rank": [t % R1 if k == 0 else 0 for k, _, t in actions],
        "discard_rank": [t % R1 if k == 1 else 0 for k, _, t in actions],
    }

    def i8(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int8, device=device)

    def played(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=played_dtype(rules), device=device)

    shifts = [0, *range(WAGER_BITS, WAGER_BITS + R1 - 1)]  # bit of each rank index
    effects = i8([[int(v) for v in fields[name]] for name in ACTION8])  # [8, A + 1]
    return Tables(
        play_key=play_key.view(C, R1, 1),
        face=torch.tensor([rules.face_value(r) for r in range(R1)], device=device).view(R1, 1),
        rank_index=torch.arange(R1, device=device, dtype=torch.int8).view(R1, 1),
        rank_ids=torch.arange(1, R1 + 1, device=device, dtype=torch.int8),
        slots=torch.arange(rules.pile_capacity + 1, device=device, dtype=torch.int8).view(-1, 1),
        copies=i8([rules.copies(t) for t in range(T)]).view(T, 1),
        colors=torch.arange(C, device=device, dtype=torch.int8).view(C, 1),
        discard_ids=i8([*range(C), -1]).view(C + 1, 1),
        phases=i8([0, 1]).view(2, 1),
        zero=torch.zeros((), dtype=torch.int8, device=device),
        one=torch.ones((), dtype=torch.int8, device=device),
        hand_bits=torch.tensor(KNOWN - 1, dtype=torch.int8, device=device),
        known_shift=torch.tensor(KNOWN.bit_length() - 1, dtype=torch.int8, device=device),
        full_deck=torch.tensor(rules.full_deck(), dtype=torch.int8, device=device),
        rank_divisor=torch.tensor([float(R1)], device=device),
        count_divisors=torch.tensor(
            [[float(2 * rules.hand_size - rules.deck_size)], [2.0 * dealt], [float(dealt)]],
            device=device,
        ),
        played_shift=played(shifts).view(R1, 1),
        played_mask=played([2**WAGER_BITS - 1] + [1] * (R1 - 1)).view(R1, 1),
        action_effects=effects.t().contiguous().view(torch.int64).view(-1),
        action_played=played([(k == 0) << shifts[t % R1] for k, _, t in actions]),
    )


@dataclass(frozen=True)
class Offsets:
    """Flat-index constants of one batch size: ``row * B + game`` addresses batch-last state.

    int32 (half the bytes of int64, and index_select / index_add_ take it) unless a flat
    index could overflow it.
    """

    games: torch.Tensor  # [B]: 0..B-1
    games64: torch.Tensor  # [B] int64 (scatter_reduce_ takes no other index dtype)
    # ``row * B`` of the row an action touches (0 where it touches none), by action ([A + 1])
    pile_row: torch.Tensor  # discard, pile draw: the colour (into [C, B])
    # ... and by ``turn % 4 * (A + 1) + action`` ([4 * (A + 1)]), where the player matters:
    hand_row: torch.Tensor  # play, discard: the card; pile draw: the colour's wager ([2, T, B])
    play_row: torch.Tensor  # int64; play: the colour's expedition (into [2, C, B])


@lru_cache(maxsize=16)
def flat_offsets(rules: Rules, device: torch.device, B: int) -> Offsets:
    T, C, L, N = rules.n_types, rules.n_colors, rules.pile_capacity, rules.deck_size
    dtype = torch.int32 if max(2 * T, C * L, N) * B < 2**31 else torch.int64
    pile_row, hand_row, play_row = _action_rows(rules, device)
    games = torch.arange(B, device=device)
    return Offsets(
        games=games.to(dtype),
        games64=games,
        pile_row=(pile_row * B).to(dtype),
        hand_row=(hand_row * B).to(dtype),
        play_row=play_row * B,
    )


@lru_cache(maxsize=8)
def _action_rows(rules: Rules, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The rows of :class:`Offsets` before they are scaled by the batch size (int64): made
    on the device once, so that a new batch size launches a few kernels rather than
    copying tables from the host (a copy that waits for a GPU)."""
    T, C = rules.n_types, rules.n_colors
    actions = action_kinds(rules)
    players = (0, 0, 1, 1)  # the player to move by turn % 4
    rows = (
        [c if k in (1, 3) else 0 for k, c, _ in actions],
        [p * T + t for p in players for _, _, t in actions],
        [(p * C + c) * (k == 0) for p in players for k, c, _ in actions],
    )
    return tuple(torch.tensor(r, dtype=torch.int64, device=device) for r in rows)


def pack_cards(rules: Rules, counts: torch.Tensor) -> torch.Tensor:
    """[..., C, B] packed expeditions (``_played``) from copies per type [..., T, B]."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    counts = counts.unflatten(-2, (C, R1)).to(played_dtype(rules))  # [..., C, R1, B]
    return (counts << lookup_tables(rules, counts.device).played_shift).sum(-2, dtype=counts.dtype)


def unpack_into(tables: Tables, packed: torch.Tensor, out: torch.Tensor) -> None:
    """Copies per (colour, rank index) ``out`` [..., C, R + 1, B] of packed sets [..., C, B]."""
    out.copy_((packed.unsqueeze(-2) >> tables.played_shift).bitwise_and_(tables.played_mask))


def unpack_cards(rules: Rules, packed: torch.Tensor) -> torch.Tensor:
    """[..., T, B] int8 copies per type of packed sets [..., C, B]."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    shape = (*packed.shape[:-2], C, R1, packed.shape[-1])
    out = torch.empty(shape, dtype=torch.int8, device=packed.device)
    unpack_into(lookup_tables(rules, packed.device), packed, out)
    return out.flatten(-3, -2)


def top_ranks(rules: Rules, expeditions: torch.Tensor) -> torch.Tensor:
    """[2, C, B] int8: the highest rank index in each expedition (0: empty or wagers only)."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    rank_index = lookup_tables(rules, expeditions.device).rank_index
    held = expeditions.clamp_max(1).view(2, C, R1, -1) * rank_index  # rank index of each held
    return held.amax(dim=2)
