"""The batched engine: B games of Lost Cities as integer tensors.

One call advances every game at once; no Python loop runs over games in
:meth:`GameBatch.step`, :meth:`GameBatch.legal_mask` or :meth:`GameBatch.encode`,
and every operation is branch-free over the batch (rows that a rule does not
touch get a zero update), so the same code runs on CPU and CUDA without host
synchronisation except for the optional legality check.

The rules are those of :mod:`lostcities_cfr.game.reference`; differential tests
(``tests/game/test_differential.py``) replay random games through both engines
and compare legal masks, features and scores at every step.

**Batch-last storage.** State lives with the game index last (``[2, T, B]``):
every elementwise rule then runs over one contiguous run of B values per
feature, which CPU vector units and GPU warps both like, and reductions over
cards or actions become sums of whole rows. Measured on 2 cores, reductions
and broadcasts along a short last axis were 10-30 times slower than the same
work batch-last (``docs/performance.md``). The public properties give the
natural batch-first views (``piles`` is ``[B, C, L]``), some without copying.

State (``T`` card types, ``C`` colours, ``L`` pile capacity, ``N`` deck size),
as stored / as the batch-first property shows it (copies marked *):

================  ===========================  ================================================
``_hand_known``   int8 [2, T, B]               hand copies + 8 * public copies, per type
 ``hands``        * int8 [B, 2, T]             copies of each type in each player's hand
 ``known``        * int8 [B, 2, T]             public copies in each hand (taken from a pile)
``_played``       int16/32 [2, C, B]           each expedition as a set: wagers, rank bits
 ``expeditions``  * int8 [B, 2, T]             copies of each type in each player's expeditions
``_piles``        int8 [L, C, B] / [B, C, L]   rank index in each pile slot, bottom first; 0 above
``_pile_len``     int8 [C, B] / * int64 [B, C] cards in each discard pile
``_deck``         int8 [N, B] / [B, N]         the shuffle in draw order; slot ``deck_pos`` is next
``_top``          int8 [2, C, B]               highest rank index in each expedition (0: none)
``_deck_pos``     int32 [B] / * int64 [B]      position of the next deck card (``N``: empty)
``_turn``         int32 [B] / * int64 [B]      half-turns (decisions) played
``_discarded``    int8 [B] / * int64 [B]       colour discarded this turn, -1 if none
``done``          bool [B]                     the round is over
================  ===========================  ================================================

The packing keeps what one action changes in as few and as small tensors as
possible: a card that leaves or joins a hand updates its hand and public counts
with one ``index_add_``, and a play adds one bit to a [2, C, B] tensor that stays
in cache, where a per-type [2, T, B] expedition count missed it on every play.
int8 keeps large batches of forked games cheap to copy; the per-game counters are
stored in 32 bits or fewer (index_select takes int32 indices, and int64 arithmetic
over [B] costs two to three times as much) and read as int64 through properties.
``_top`` is derived from the expeditions and kept so that
:meth:`GameBatch.legal_mask` need not search them.

**What makes it fast on CPU** (measured on 2 cores, one torch thread, B = 8192,
with another job on the second core, so that most state lives outside the
caches): few calls over [T, B] or [A, B] tensors, no per-call Python scalars in
int8 arithmetic (a 0-d tensor operand keeps the vectorised path), no int8
comparisons or ``torch.where`` against a broadcast or a scalar (only same-shape
comparisons are vectorised; ``logical_not`` of a difference is), and updates as
one flat ``index_select`` / ``index_add_`` per tensor, in which games that an
action leaves alone address their own column of row 0 (in cache) rather than a
random row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import torch

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game.encoding import feature_blocks, feature_size
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules

# ``_hand_known`` = hand copies + _KNOWN * public copies: a hand holds at most
# ``n_wagers`` <= 5 copies of a type, so both counts fit one int8. Public copies are part
# of the hand, so the value is non-zero exactly when the hand holds the type (legal_mask
# reads it as it is).
_KNOWN = 8
# ``_played``: the wager count in the low _WAGER_BITS bits (n_wagers <= 5), then one bit
# per rank index 1..R (each number card exists once)
_WAGER_BITS = 3


def _played_dtype(rules: Rules) -> torch.dtype:
    return torch.int16 if _WAGER_BITS + rules.n_ranks < 16 else torch.int32


@dataclass(frozen=True)
class _Tables:
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
    hand_bits: torch.Tensor  # _KNOWN - 1: ``_hand_known & hand_bits`` is the hand
    known_shift: torch.Tensor  # log2(_KNOWN): ``_hand_known >> known_shift`` the public copies
    full_deck: torch.Tensor  # [N] int8, sorted
    # ``_played`` packs an expedition into one integer: the wagers in the low _WAGER_BITS
    # bits, then one bit per rank index 1..R; ``played >> shift & mask`` unpacks it
    played_shift: torch.Tensor  # [R + 1, 1]
    played_mask: torch.Tensor  # [R + 1, 1]
    # Per action lookups (integer division is not vectorised on CPU), with one more entry,
    # action A, that does nothing: step gives it to finished games. The eight int8 effects of
    # _ACTION8 are packed into one int64, so that a batch decodes with one index_select
    # (along dim 0: index_select along dim 1 of an [8, A] table was 20 times slower).
    action_effects: torch.Tensor  # [A + 1] int64
    action_played: torch.Tensor  # [A + 1]: what a play adds to its ``_played`` entry, 0 otherwise


# the int8 fields of _Tables.action_effects: what one action does (0 for the no-op but
# "discarded")
_ACTION8 = (
    "discarded",  # the colour a discard leaves, -1 otherwise
    "deck",  # 1 for the deck draw
    "pile",  # 1 for a pile draw
    "pile_len",  # change of the pile's length: +1 discard, -1 pile draw
    "hand",  # change of the player's hand at the card taken or given: -1 play/discard, +1 draw
    "card",  # 1 for play or discard
    "play_rank",  # rank index of the card played, 0 otherwise
    "discard_rank",  # rank index of the card discarded, 0 otherwise
)


def _action_kinds(rules: Rules) -> list[tuple[int, int, int]]:
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
def _tables(rules: Rules, device: torch.device) -> _Tables:
    C, R1, T = rules.n_colors, rules.n_ranks + 1, rules.n_types
    ranks = torch.arange(T, device=device) % R1
    # A card is playable iff play_key > 2 * top, where top is the highest rank index in
    # the expedition (0: empty or wagers only): a number card must beat the top, a wager
    # (key 1) needs top == 0. One comparison instead of two.
    play_key = torch.where(ranks == 0, 1, 2 * ranks).to(torch.int8)
    actions = _action_kinds(rules)
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
        return torch.tensor(values, dtype=_played_dtype(rules), device=device)

    shifts = [0, *range(_WAGER_BITS, _WAGER_BITS + R1 - 1)]  # bit of each rank index
    effects = i8([[int(v) for v in fields[name]] for name in _ACTION8])  # [8, A + 1]
    return _Tables(
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
        hand_bits=torch.tensor(_KNOWN - 1, dtype=torch.int8, device=device),
        known_shift=torch.tensor(_KNOWN.bit_length() - 1, dtype=torch.int8, device=device),
        full_deck=torch.tensor(rules.full_deck(), dtype=torch.int8, device=device),
        played_shift=played(shifts).view(R1, 1),
        played_mask=played([2**_WAGER_BITS - 1] + [1] * (R1 - 1)).view(R1, 1),
        action_effects=effects.t().contiguous().view(torch.int64).view(-1),
        action_played=played([(k == 0) << shifts[t % R1] for k, _, t in actions]),
    )


_feature_blocks = cache(feature_blocks)


@dataclass(frozen=True)
class _Offsets:
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
def _offsets(rules: Rules, device: torch.device, B: int) -> _Offsets:
    T, C, L, N = rules.n_types, rules.n_colors, rules.pile_capacity, rules.deck_size
    dtype = torch.int32 if max(2 * T, C * L, N) * B < 2**31 else torch.int64
    actions = _action_kinds(rules)

    def rows(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device) * B

    games = torch.arange(B, device=device)
    players = (0, 0, 1, 1)  # the player to move by turn % 4
    return _Offsets(
        games=games.to(dtype),
        games64=games,
        pile_row=rows([c if k in (1, 3) else 0 for k, c, _ in actions]),
        hand_row=rows([p * T + t for p in players for _, _, t in actions]),
        play_row=rows([(p * C + c) * (k == 0) for p in players for k, c, _ in actions]).long(),
    )


_STATE = ("_hand_known", "_played", "_piles", "_pile_len", "_deck", "_top")
_FLAT = {
    "_deck_pos": torch.int32,
    "_turn": torch.int32,
    "_discarded": torch.int8,
    "done": torch.bool,
}


class GameBatch:
    """B games in lockstep. Build with :meth:`new` or :meth:`from_states`."""

    def __init__(self, rules: Rules, **state: torch.Tensor) -> None:
        """Low-level: the batch-last tensors named in the module docstring (with ``_``).

        Cards may come packed as stored (``_hand_known``, ``_played``) or as counts
        per type ([2, T, B] each: ``_hands`` and ``_known``; ``_expeditions``), which
        are packed here; ``_top`` is derived from the expeditions when not given, and
        integer tensors of other dtypes (``_pile_len`` and the flat ones were int64) are
        converted.
        """
        state = dict(state)
        for name in ("deck_pos", "turn", "discarded"):  # the public names (int64 copies)
            if name in state:
                state[f"_{name}"] = state.pop(name)
        if "_hand_known" not in state and {"_hands", "_known"} <= set(state):
            hands, known = state.pop("_hands"), state.pop("_known")
            state["_hand_known"] = hands.to(torch.int8) + _KNOWN * known.to(torch.int8)
        if "_played" not in state and "_expeditions" in state:
            expeditions = state.pop("_expeditions")
            state["_played"] = _pack_cards(rules, expeditions)
            state.setdefault("_top", _top_ranks(rules, expeditions))
        missing = set((*_STATE, *_FLAT)) - set(state) - {"_top"}
        if missing:
            raise ValueError(f"GameBatch needs state tensors {sorted(missing)}")
        slots_colors = (rules.pile_capacity, rules.n_colors)
        if tuple(state["_piles"].shape[:2]) != slots_colors:
            raise ValueError(
                f"_piles must be [L, C, B] = [{slots_colors[0]}, {slots_colors[1]}, B] (slot-major), "
                f"got {list(state['_piles'].shape)}"
            )
        self.rules = rules
        state["_pile_len"] = state["_pile_len"].to(torch.int8)
        state.update({name: state[name].to(dtype) for name, dtype in _FLAT.items()})
        if "_top" not in state:
            state["_top"] = _top_ranks(rules, _unpack_cards(rules, state["_played"]))
        for name in (*_STATE, *_FLAT):
            setattr(self, name, state[name])

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def new(
        cls,
        rules: Rules,
        batch_size: int,
        seed: int | None = None,
        device: str | torch.device = "cpu",
    ) -> GameBatch:
        """``batch_size`` freshly shuffled and dealt games.

        The shuffle draws from a CPU generator seeded with ``seed`` (the global
        torch RNG when None), so a seed deals the same games on every device.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        B, N, H, T = batch_size, rules.deck_size, rules.hand_size, rules.n_types
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        order = torch.rand(N, B, generator=generator).argsort(dim=0)  # [N, B] permutations
        # the whole shuffle stays in ``deck``: the first 2H cards are the hands and
        # ``deck_pos`` starts past them, so slot ``deck_pos`` is always the next draw.
        deck = _tables(rules, torch.device("cpu")).full_deck[order]  # [N, B] int8
        seat = (torch.arange(2 * H) // H * T)[:, None]  # [2H, 1] offset of each dealt card
        hands = torch.zeros(2 * T, B, dtype=torch.int8)
        hands.scatter_add_(0, deck[: 2 * H].long() + seat, torch.ones(2 * H, B, dtype=torch.int8))
        zeros = cls._zeros(rules, B, torch.device(device))
        zeros.update(_hands=hands.view(2, T, B), _deck=deck)
        zeros["_deck_pos"] += 2 * H
        return cls(rules, **{k: v.to(device) for k, v in zeros.items()})

    @staticmethod
    def _zeros(rules: Rules, B: int, device: torch.device) -> dict[str, torch.Tensor]:
        T, C, L, N = rules.n_types, rules.n_colors, rules.pile_capacity, rules.deck_size

        def z(*shape: int, dtype: torch.dtype = torch.int8) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=device)

        return {
            "_hands": z(2, T, B),
            "_expeditions": z(2, T, B),
            "_piles": z(L, C, B),
            "_pile_len": z(C, B),
            "_deck": z(N, B),
            "_known": z(2, T, B),
            **{name: z(B, dtype=dtype) for name, dtype in _FLAT.items()},
            "_discarded": torch.full((B,), -1, dtype=torch.int8, device=device),
        }

    @classmethod
    def from_states(
        cls, states: Sequence[GameState], device: str | torch.device = "cpu"
    ) -> GameBatch:
        """Stack reference-engine states (any point of the round) into one batch."""
        if not states:
            raise ValueError("from_states needs at least one GameState")
        rules = states[0].rules
        for i, s in enumerate(states):
            if s.rules != rules:
                raise ValueError(f"states[{i}] has rules {s.rules}, states[0] has {rules}")
        N = rules.deck_size
        z = cls._zeros(rules, len(states), torch.device("cpu"))
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
        return cls(rules, **{k: v.to(device) for k, v in z.items()})

    def to_states(self) -> list[GameState]:
        """The games as reference-engine states (for tests, display and exact analysis)."""
        rules, N, R1 = self.rules, self.rules.deck_size, self.rules.n_ranks + 1
        cpu = self.to("cpu")
        hands, expeditions, known = cpu.hands.tolist(), cpu.expeditions.tolist(), cpu.known.tolist()
        piles, pile_len, deck = cpu.piles.tolist(), cpu.pile_len.tolist(), cpu.deck.tolist()
        states = []
        for b in range(cpu.batch_size):
            discarded = int(cpu.discarded[b])
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
                    deck=deck[b][int(cpu.deck_pos[b]) : N],
                    known=known[b],
                    turn=int(cpu.turn[b]),
                    discarded_color=None if discarded < 0 else discarded,
                )
            )
        return states

    # ---- batch-first views ---------------------------------------------------------------
    @property
    def hands(self) -> torch.Tensor:
        """[B, 2, T] int8: a copy (stored with the public copies, ``_hand_known``)."""
        return (self._hand_known % _KNOWN).permute(2, 0, 1)

    @property
    def expeditions(self) -> torch.Tensor:
        """[B, 2, T] int8: a copy (stored packed per colour, ``_played``)."""
        return _unpack_cards(self.rules, self._played).permute(2, 0, 1)

    @property
    def piles(self) -> torch.Tensor:
        """[B, C, L] int8 view: rank index per slot, bottom first."""
        return self._piles.permute(2, 1, 0)

    @property
    def pile_len(self) -> torch.Tensor:
        """[B, C] int64: a copy (stored as int8, which the rules read and write faster)."""
        return self._pile_len.t().long()

    @property
    def deck(self) -> torch.Tensor:
        """[B, N] int8 view: the shuffle in draw order; slot ``deck_pos`` is next."""
        return self._deck.t()

    @property
    def known(self) -> torch.Tensor:
        """[B, 2, T] int8: a copy (stored with the hands, ``_hand_known``)."""
        return (self._hand_known // _KNOWN).permute(2, 0, 1)

    # ---- selection (forking traversals) ------------------------------------------------------
    def _map(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> GameBatch:
        """A new batch with ``fn(tensor, batch_dim)`` applied to every state tensor."""
        state = {name: fn(getattr(self, name), getattr(self, name).dim() - 1) for name in _STATE}
        state.update({name: fn(getattr(self, name), 0) for name in _FLAT})
        return GameBatch(self.rules, **state)

    def select(self, index: torch.Tensor | Sequence[int]) -> GameBatch:
        """A new batch of the games at ``index`` ([K] int64); repeats fork a game."""
        index = torch.as_tensor(index, dtype=torch.int64, device=self.device)
        return self._map(lambda v, dim: v.index_select(dim, index))

    def repeat(self, k: int) -> GameBatch:
        """Each game repeated ``k`` times in a row ([B * k]): game b becomes rows b*k..b*k+k-1."""
        return self._map(lambda v, dim: v.repeat_interleave(k, dim=dim))

    def clone(self) -> GameBatch:
        return self._map(lambda v, dim: v.clone())

    def to(self, device: str | torch.device) -> GameBatch:
        return self._map(lambda v, dim: v.to(device))

    @staticmethod
    def cat(batches: Sequence[GameBatch]) -> GameBatch:
        """One batch holding the games of ``batches`` in order (same rules)."""
        first = batches[0]
        state = {}
        for name in (*_STATE, *_FLAT):
            tensors = [getattr(b, name) for b in batches]
            state[name] = torch.cat(tensors, dim=tensors[0].dim() - 1 if name in _STATE else 0)
        return GameBatch(first.rules, **state)

    @property
    def batch_size(self) -> int:
        return self.done.shape[0]

    def __len__(self) -> int:
        return self.batch_size

    def __repr__(self) -> str:
        return (
            f"GameBatch(batch_size={self.batch_size}, device={self.device}, "
            f"done={int(self.done.sum())}, rules={self.rules})"
        )

    @property
    def device(self) -> torch.device:
        return self.done.device

    @property
    def turn(self) -> torch.Tensor:
        """[B] int64: half-turns (decisions) played (a copy; stored as int32)."""
        return self._turn.long()

    @property
    def deck_pos(self) -> torch.Tensor:
        """[B] int64: position of the next deck card, ``N`` once the deck is empty (a copy)."""
        return self._deck_pos.long()

    @property
    def discarded(self) -> torch.Tensor:
        """[B] int64: the colour discarded this turn, -1 if none (a copy; stored as int8)."""
        return self._discarded.long()

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: 0 or 1; a turn is two decisions of the same player."""
        return ((self._turn >> 1) & 1).long()

    @property
    def phase(self) -> torch.Tensor:
        """[B] int64: 0 for the card decision (play/discard), 1 for the draw decision."""
        return (self._turn & 1).long()

    @property
    def deck_count(self) -> torch.Tensor:
        """[B] int64: cards left in the deck."""
        return self.rules.deck_size - self.deck_pos

    # ---- rules ----------------------------------------------------------------------------
    def legal_mask(self) -> torch.Tensor:
        """[B, A] bool: the legal actions of the player to move; all False in finished games.

        The result is a transposed view of a contiguous [A, B] tensor (batch-last,
        like the state); index it as [B, A] as usual. Built from 0/1 int8
        arithmetic rather than comparisons, which torch vectorises for int8 only
        between two tensors of the same shape (not with a broadcast or a scalar).
        """
        rules, B = self.rules, self.batch_size
        T, C, R1 = rules.n_types, rules.n_colors, rules.n_ranks + 1
        tables = _tables(rules, self.device)
        bits = self._turn.to(torch.int8).bitwise_and_(3)  # [B] bit 0: phase, bit 1: player
        active = (~self.done).view(torch.int8)
        draw_turn = bits & active  # [B] 0/1
        card_turn = active - draw_turn
        player = bits >> tables.one
        mask = torch.empty(rules.n_actions, B, dtype=torch.int8, device=self.device)
        discard, play = mask[T : 2 * T], mask[:T]
        # held (copies clipped to 1) on a card turn: min(hand, weight) per player, with
        # weights 0/1 of which at most one is 1, then the larger; min/max run at copy speed,
        # where int8 multiplication does not (no 8-bit multiply in AVX2). ``play`` is scratch.
        held_1 = player & card_turn  # [B] 1 where player 1 plays or discards
        torch.minimum(self._hand_known[0], card_turn - held_1, out=discard)
        torch.minimum(self._hand_known[1], held_1, out=play)
        torch.maximum(discard, play, out=discard)
        top = torch.addcmul(self._top[0], self._top[1] - self._top[0], player)  # [C, B]
        torch.sub(tables.play_key, (top + top).view(C, 1, B), out=play.view(C, R1, B))
        torch.clamp(play, min=tables.zero, max=discard, out=play)  # playable and discardable
        mask[2 * T] = draw_turn
        # a pile is drawable when it is not empty and was not discarded to this turn
        not_discarded = (tables.colors - self._discarded).bool()  # [C, B]
        piles = mask[2 * T + 1 :]
        torch.mul(not_discarded, draw_turn, out=piles)
        torch.clamp(self._pile_len, max=piles, out=piles)
        return mask.view(torch.bool).t()

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply one action ([B] int64) in every unfinished game, in place.

        Finished games ignore their entry. With ``check`` (the default) an
        illegal action in any unfinished game raises :class:`IllegalActionError`
        naming the game, the action and the reason, and no game changes.
        Callers that draw actions from :meth:`legal_mask` may pass
        ``check=False`` to skip the test (and its device sync).
        """
        rules, B = self.rules, self.batch_size
        N = rules.deck_size
        actions = torch.as_tensor(actions, device=self.device)
        if actions.shape != (B,):
            raise ValueError(f"actions must have shape [{B}], got {list(actions.shape)}")
        if (
            actions.dtype.is_floating_point
            or actions.dtype.is_complex
            or actions.dtype == torch.bool
        ):
            # Converting them to action ids would truncate 3.7 to 3: refused, not guessed.
            raise TypeError(
                f"actions have dtype {actions.dtype}; expected an integer dtype (int64 ids)"
            )
        if check:
            self._check(actions)
        tables = _tables(rules, self.device)
        offsets = _offsets(rules, self.device, B)
        games = offsets.games
        active = ~self.done
        # legal actions imply the phase, so the action alone says what happens; finished
        # games (which may pass anything) get the no-op action A (a copy: never the caller's)
        a = actions.to(torch.int32, copy=True).masked_fill_(self.done, rules.n_actions)
        effect = tables.action_effects.index_select(0, a)  # [B] int64: 8 int8 fields
        effect = effect.view(torch.int8).view(B, len(_ACTION8)).unbind(1)
        discarded, deck_draw, pile_draw, pile_delta, hand_delta, card, play_rank, discard_rank = (
            effect
        )
        # the action and the player to move (turn % 4 is player * 2 + phase)
        player_action = torch.add(a, self._turn & 3, alpha=rules.n_actions + 1)

        # Every update is one index_select / index_add_ on a flat view, one index per game
        # (``row * B + game``). An action that leaves a tensor alone addresses row 0 of its
        # own column, with a zero update: those reads and writes stay in cache and in order,
        # where random rows of the large state tensors miss it.
        # the pile a discard fills or a pile draw empties, and its slot
        length_at = offsets.pile_row.index_select(0, a) + games  # [B] into [C, B]
        length = self._pile_len.view(-1).index_select(0, length_at)  # [B] int8
        slot = length * (pile_delta * pile_delta) - pile_draw  # discard: length, draw: length - 1
        # slot-major piles ([L, C, B]): the slot's row is the pile's [C, B] row + slot * C * B
        pile_at = torch.add(length_at, slot, alpha=rules.n_colors * B)
        top_rank = self._piles.view(-1).index_select(0, pile_at) * pile_draw  # [B] int8
        # the card a draw takes: the deck's next, or the top of the pile
        deck_at = torch.addcmul(games, self._deck_pos, deck_draw, value=B)  # [B] into [N, B]
        drawn = torch.addcmul(top_rank, self._deck.view(-1).index_select(0, deck_at), deck_draw)

        # hands, expeditions and public copies at the card given or taken
        hand_row = offsets.hand_row.index_select(0, player_action)
        hand_row.add_(drawn, alpha=B)
        hand_known = self._hand_known.view(-1)
        # a card leaving a hand makes one public copy private again (if it has one); a pile
        # draw makes one public. Draws read row 0 of their column, and ignore it.
        given = hand_known.index_select(0, torch.addcmul(games, hand_row, card))  # [B] int8
        public = pile_draw - card * (given >> tables.known_shift).clamp_(max=1)  # [B] -1/0/1
        hand_known.index_add_(0, hand_row + games, torch.add(hand_delta, public, alpha=_KNOWN))
        # a play adds its card to the expedition and raises its top (legal plays never lower it)
        played_at = offsets.play_row.index_select(0, player_action) + offsets.games64
        self._played.view(-1).index_add_(0, played_at, tables.action_played.index_select(0, a))
        self._top.view(-1).scatter_reduce_(0, played_at, play_rank, "amax")

        # piles: a discard fills slot ``length``, a pile draw clears the top slot, so that
        # slots at and above ``pile_len`` hold 0 and both are one addition
        self._piles.view(-1).index_add_(0, pile_at, discard_rank - top_rank)
        self._pile_len.view(-1).index_add_(0, length_at, pile_delta)

        self._discarded = torch.where(active, discarded, self._discarded)
        self._deck_pos = self._deck_pos + deck_draw
        self._turn = self._turn + active
        self.done = self.done | (self._deck_pos >= N) | (self._turn >= rules.max_turns)

    def _check(self, actions: torch.Tensor) -> None:
        A = self.rules.n_actions
        in_range = (actions >= 0) & (actions < A)
        legal = self.legal_mask().gather(1, actions.long().clamp(0, A - 1)[:, None]).squeeze(1)
        bad = ~self.done & ~(in_range & legal)
        if not bool(bad.any()):
            return
        b = int(bad.nonzero()[0, 0])
        action = int(actions[b])
        state = self.select([b]).to_states()[0]
        try:
            state.apply(action)  # the reference engine words the reason
        except IllegalActionError as error:
            raise IllegalActionError(f"game {b} of {self.batch_size}: {error}") from None
        raise IllegalActionError(
            f"game {b} of {self.batch_size}: {self.rules.action_name(action)} (action {action}) "
            "is illegal in the batched engine"
        )

    # ---- outcomes -------------------------------------------------------------------------
    def scores(self) -> torch.Tensor:
        """[B, 2] int64: each player's score as the expeditions stand."""
        return expedition_scores(self.rules, self.expeditions).sum(-1)

    def returns(self) -> torch.Tensor:
        """[B, 2] float32: zero-sum utilities ``score(p) - score(1 - p)``."""
        s = self.scores().float()
        diff = s[:, 0] - s[:, 1]
        return torch.stack([diff, -diff], dim=1)

    # ---- information state ----------------------------------------------------------------
    def encode(self, player: torch.Tensor | None = None) -> torch.Tensor:
        """[B, F] float32 features (``docs/encoding.md``) for ``player`` ([B]; default: to move).

        Built feature-major ([F, B], batch-last like the state); the result is the
        transposed view, which matrix multiplies read without a copy (BLAS takes
        the transpose as a flag). Call ``.contiguous()`` if you need row-major rows.
        """
        rules, B = self.rules, self.batch_size
        T, C, R1, L = rules.n_types, rules.n_colors, rules.n_ranks + 1, rules.pile_capacity
        tables = _tables(rules, self.device)
        blocks = _feature_blocks(rules)
        bits = self._turn.to(torch.int8).bitwise_and_(3)  # [B] bit 0: phase, bit 1: player to move
        to_move = bits >> tables.one
        viewer = to_move if player is None else player.to(torch.int8)
        # Every block but two is a small count: build them all in int8 ([F, B]) and convert
        # once; one-hot blocks come from logical_not of a difference (int8 ``==`` only
        # vectorises between same-shape tensors).
        feat = torch.empty(feature_size(rules), B, dtype=torch.int8, device=self.device)

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
        played = torch.empty_like(self._played)  # [2, C, B] the viewer's first
        viewer_first(self._played, played[0], played[1])
        own_and_opp = feat[blocks["own_expeditions"].start : blocks["opp_expeditions"].stop]
        _unpack_into(tables, played, own_and_opp.view(2, C, R1, B))
        # the packed hands and public copies: the viewer's hand, the opponent's public copies
        viewer_first(self._hand_known, block("hand"), block("opp_known"))
        block("hand").bitwise_and_(tables.hand_bits)
        block("opp_known").bitwise_right_shift_(tables.known_shift)

        # pile_sequence holds rank index + 1 in the occupied slots, 0 above
        in_pile = (self._pile_len.view(C, 1, B) - tables.slots).clamp_(0, 1)  # [C, L + 1, B]
        sequence = block("pile_sequence").view(C, L, B)
        torch.addcmul(in_pile[:, :L], self._piles.transpose(0, 1), in_pile[:, :L], out=sequence)
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
        discarded = self._discarded - tables.discard_ids  # [C + 1, B]
        torch.logical_not(discarded, out=block("discarded_color").view(torch.bool))

        out = feat.to(torch.float32)
        out[blocks["pile_sequence"]] /= R1
        deck_fraction = out[blocks["deck_fraction"]][0]
        # (deck_pos - N) / -(N - 2H): the float32 quotient of cards left by cards after the deal
        torch.sub(self._deck_pos, rules.deck_size, out=deck_fraction)
        deck_fraction /= 2 * rules.hand_size - rules.deck_size
        return out.t()


def expedition_scores(rules: Rules, counts: torch.Tensor) -> torch.Tensor:
    """[..., C] int64: the score of each expedition from copies per card type ``[..., T]``.

    ``(sum of face values - cost) * (1 + wagers)``, plus the bonus from
    ``bonus_threshold`` cards on; 0 for an expedition that was never started.
    """
    counts = counts.reshape(*counts.shape[:-1], rules.n_colors, rules.n_ranks + 1).long()
    n_cards = counts.sum(-1)
    face = _tables(rules, counts.device).face.view(-1)
    score = ((counts * face).sum(-1) - rules.expedition_cost) * (1 + counts[..., 0])
    score = score + rules.bonus * (n_cards >= rules.bonus_threshold)
    return torch.where(n_cards > 0, score, 0)


def _pack_cards(rules: Rules, counts: torch.Tensor) -> torch.Tensor:
    """[..., C, B] packed expeditions (``_played``) from copies per type [..., T, B]."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    counts = counts.unflatten(-2, (C, R1)).to(_played_dtype(rules))  # [..., C, R1, B]
    return (counts << _tables(rules, counts.device).played_shift).sum(-2, dtype=counts.dtype)


def _unpack_into(tables: _Tables, packed: torch.Tensor, out: torch.Tensor) -> None:
    """Copies per (colour, rank index) ``out`` [..., C, R + 1, B] of packed sets [..., C, B]."""
    out.copy_((packed.unsqueeze(-2) >> tables.played_shift).bitwise_and_(tables.played_mask))


def _unpack_cards(rules: Rules, packed: torch.Tensor) -> torch.Tensor:
    """[..., T, B] int8 copies per type of packed sets [..., C, B]."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    shape = (*packed.shape[:-2], C, R1, packed.shape[-1])
    out = torch.empty(shape, dtype=torch.int8, device=packed.device)
    _unpack_into(_tables(rules, packed.device), packed, out)
    return out.flatten(-3, -2)


def _top_ranks(rules: Rules, expeditions: torch.Tensor) -> torch.Tensor:
    """[2, C, B] int8: the highest rank index in each expedition (0: empty or wagers only)."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    rank_index = _tables(rules, expeditions.device).rank_index
    held = expeditions.clamp_max(1).view(2, C, R1, -1) * rank_index  # rank index of each held
    return held.amax(dim=2)


def _expand_counts(counts: Sequence[int]) -> list[int]:
    """[2, 0, 1] -> [0, 0, 2]: the sorted ids of a per-type count vector."""
    return [t for t, n in enumerate(counts) for _ in range(n)]


def _split_colors(counts: Sequence[int], per_color: int) -> list[Sequence[int]]:
    return [counts[c * per_color : (c + 1) * per_color] for c in range(len(counts) // per_color)]


def random_legal_actions(
    legal: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """[B] int64: a uniformly random legal action per row of ``legal`` ([B, A] bool).

    One 16-bit draw r per row picks the k-th legal action, k = n - 1 - (r * n >> 16)
    (n legal actions; each k has probability within 2**-16 of 1/n), through a running
    count, far cheaper than drawing A numbers per row. r is row b's 16 bits of the
    int64 words ``random_(-2**63, None)`` draws, word b // 4, little-endian: half as
    many generator calls as ``torch.rand(B)``. Works batch-last (on ``legal.t()``,
    contiguous for masks from :meth:`GameBatch.legal_mask`), where the count is a sum
    of rows. Rows with no legal action get action 0.
    """
    B, A = legal.shape
    # int8 counts are enough below 128 actions (classic 106, six colours 127)
    count_dtype = torch.int8 if A < 128 else torch.int16
    legal_t = legal.t().contiguous().view(torch.int8)  # [A, B]; ours: no copy
    if count_dtype != torch.int8:
        legal_t = legal_t.to(count_dtype)
    # The running count goes in two levels, so that every call works on whole rows
    # (``cumsum`` along the action axis is a slow strided scan on CPU): blocks of S
    # actions, then one-action blocks for the last ``A % S``. Block totals first, then
    # the count left before each block, then a scan inside the blocks.
    S = _count_block(A)
    H, T = A // S, A % S
    head = legal_t[: H * S].view(H, S, B)
    G = H + T  # blocks
    totals = torch.empty(G, B, dtype=count_dtype, device=legal.device)
    torch.sum(head, 1, dtype=count_dtype, out=totals[:H])
    if T:
        totals[H:] = legal_t[H * S :]
    n_legal = totals.sum(0, dtype=count_dtype)  # [B]
    # room[g] = k + 1 - (legal actions before block g); k + 1 = n - (r * n >> 16) is 0
    # in rows with no legal action, so that no action is counted before the pick there
    room = torch.empty(G, B, dtype=count_dtype, device=legal.device)
    rooms, block_totals = room.unbind(0), totals.unbind(0)
    words = torch.empty((B + 3) // 4, dtype=torch.int64, device=legal.device)
    words.random_(-(2**63), None, generator=generator)
    r = words.view(torch.uint16)[:B].to(torch.int32)  # [B] uniform on 0..65535
    # r * n < 2**23 (2**31 for int16 counts): bits 16.. of it, read as a strided view
    # of its bytes (little-endian, as on every platform torch ships for), are
    # r * n >> 16 without a shift and a conversion
    size = n_legal.element_size()
    torch.sub(n_legal, (r * n_legal).view(count_dtype)[2 // size :: 4 // size], out=rooms[0])
    for g in range(1, G):
        torch.sub(rooms[g - 1], block_totals[g - 1], out=rooms[g])
    # left[a] = k + 1 - (legal actions up to a): >= 1 exactly for the actions before the pick
    left = torch.empty(A, B, dtype=count_dtype, device=legal.device)
    if T:
        torch.sub(room[H:], legal_t[H * S :], out=left[H * S :])
    before = room[:H]
    for head_s, left_s in zip(head.unbind(1), left[: H * S].view_as(head).unbind(1), strict=True):
        before = torch.sub(before, head_s, out=left_s)
    # the (k+1)-th legal action's index = how many actions come before it (0 if none)
    return left.clamp_(0, 1).sum(0, dtype=count_dtype).long()


@cache
def _count_block(A: int) -> int:
    """The block size S of random_legal_actions: fewest calls (S scan steps, one per block)."""
    return min(range(1, A + 1), key=lambda S: S + A // S + A % S)
