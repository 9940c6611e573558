"""The batched engine: B games of Lost Cities as integer tensors.

One call advances every game at once; no Python loop runs over games in
:meth:`GameBatch.step`, :meth:`GameBatch.legal_mask` or :meth:`GameBatch.encode`,
and every operation is branch-free over the batch (rows that a rule does not
touch get a zero update), so the same code runs on CPU and CUDA without host
synchronisation except for the optional legality check.

The rules are those of :mod:`lostcities_cfr.game.reference`; differential tests
(``tests/game/test_differential.py``) replay random games through both engines
and compare legal masks, features and scores at every step.

Around it: :mod:`lostcities_cfr.game.packed` holds the bit layouts, lookup tables and
flat offsets of the packed state below, :mod:`lostcities_cfr.game.advance` the
arithmetic of one step and :mod:`lostcities_cfr.game.legal` that of the legal mask (each a
function of the state tensors), :mod:`lostcities_cfr.game.encoding` the encoder that
:meth:`GameBatch.encode` calls, :mod:`lostcities_cfr.game.fused` the compiled kernels
(``kernels="compiled"``), :mod:`lostcities_cfr.game.stacking` the conversions to and from
the reference engine's states, and
:func:`lostcities_cfr.agents.random_actions.random_legal_actions` draws random play.

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

The module is one class, the state and the rules that read it; its packing
(``packed.py``), the arithmetic of its step (``advance.py``) and of its legal mask
(``legal.py``), its encoder (``encoding.py``) and its conversions to and from reference
states (``stacking.py``) live beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game import fused, legal
from lostcities_cfr.game.advance import advance
from lostcities_cfr.game.encoding import encode_batch, encode_history
from lostcities_cfr.game.fused import check_kernels, run_compiled
from lostcities_cfr.game.packed import (
    KNOWN,
    flat_offsets,
    lookup_tables,
    pack_cards,
    top_ranks,
    unpack_cards,
)
from lostcities_cfr.game.protocol import action_ids
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.game.stacking import stack_states, unstack_states

_STATE = ("_hand_known", "_played", "_piles", "_pile_len", "_deck", "_top")
_FLAT = {
    "_deck_pos": torch.int32,
    "_turn": torch.int32,
    "_discarded": torch.int8,
    "done": torch.bool,
}


class GameBatch:
    """B games in lockstep. Build with :meth:`new` or :meth:`from_states`."""

    def __init__(self, rules: Rules, kernels: str = "eager", **state: torch.Tensor) -> None:
        """Low-level: the batch-last tensors named in the module docstring (with ``_``).

        ``kernels``: ``"eager"`` runs the rules as torch calls; ``"compiled"`` runs the
        legal mask, the encoder and the step as ``torch.compile``d kernels
        (:mod:`lostcities_cfr.game.fused`: the same values, a few kernels per call
        instead of up to 180 operator calls; for a GPU). Batches made from this one keep it.

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
            state["_hand_known"] = hands.to(torch.int8) + KNOWN * known.to(torch.int8)
        if "_played" not in state and "_expeditions" in state:
            expeditions = state.pop("_expeditions")
            state["_played"] = pack_cards(rules, expeditions)
            state.setdefault("_top", top_ranks(rules, expeditions))
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
        self.kernels = check_kernels(kernels)
        # encode() and legal_mask() of the state as it is, until step() changes it (and
        # legal_mask() until done does): a step's sampler, agents and engine read them often.
        self._memo: dict[str, torch.Tensor] = {}
        # converted only where needed: a ``to`` that changes nothing is still an operator
        # call, and batches are rebuilt at every step of a walk (forks, compaction)
        for name, dtype in (("_pile_len", torch.int8), *_FLAT.items()):
            if state[name].dtype != dtype:
                state[name] = state[name].to(dtype)
        if "_top" not in state:
            state["_top"] = top_ranks(rules, unpack_cards(rules, state["_played"]))
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
        kernels: str = "eager",
    ) -> GameBatch:
        """``batch_size`` freshly shuffled and dealt games.

        The shuffle draws from a CPU generator seeded with ``seed`` (the global
        torch RNG when None), so a seed deals the same games on every device. ``kernels``:
        as in the constructor.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        B, N, H, T = batch_size, rules.deck_size, rules.hand_size, rules.n_types
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        order = torch.rand(N, B, generator=generator).argsort(dim=0)  # [N, B] permutations
        # the whole shuffle stays in ``deck``: the first 2H cards are the hands and
        # ``deck_pos`` starts past them, so slot ``deck_pos`` is always the next draw.
        deck = lookup_tables(rules, torch.device("cpu")).full_deck[order]  # [N, B] int8
        seat = (torch.arange(2 * H) // H * T)[:, None]  # [2H, 1] offset of each dealt card
        hands = torch.zeros(2 * T, B, dtype=torch.int8)
        hands.scatter_add_(0, deck[: 2 * H].long() + seat, torch.ones(2 * H, B, dtype=torch.int8))
        zeros = cls._zeros(rules, B, torch.device(device))
        zeros.update(_hands=hands.view(2, T, B), _deck=deck)
        zeros["_deck_pos"] += 2 * H
        return cls(rules, kernels, **{k: v.to(device) for k, v in zeros.items()})

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
        z = cls._zeros(rules, len(states), torch.device("cpu"))
        stack_states(states, z)
        return cls(rules, **{k: v.to(device) for k, v in z.items()})

    def to_states(self) -> list[GameState]:
        """The games as reference-engine states (for tests, display and exact analysis)."""
        return unstack_states(self.to("cpu"))

    # ---- batch-first views ---------------------------------------------------------------
    @property
    def hands(self) -> torch.Tensor:
        """[B, 2, T] int8: a copy (stored with the public copies, ``_hand_known``)."""
        return (self._hand_known % KNOWN).permute(2, 0, 1)

    @property
    def expeditions(self) -> torch.Tensor:
        """[B, 2, T] int8: a copy (stored packed per colour, ``_played``)."""
        return unpack_cards(self.rules, self._played).permute(2, 0, 1)

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
        return (self._hand_known // KNOWN).permute(2, 0, 1)

    # ---- selection (forking traversals) ------------------------------------------------------
    def _map(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> GameBatch:
        """A new batch with ``fn(tensor, batch_dim)`` applied to every state tensor."""
        state = {name: fn(getattr(self, name), getattr(self, name).dim() - 1) for name in _STATE}
        state.update({name: fn(getattr(self, name), 0) for name in _FLAT})
        return GameBatch(self.rules, self.kernels, **state)

    def select(self, index: torch.Tensor | Sequence[int]) -> GameBatch:
        """A new batch of the games at ``index`` ([K] int64); repeats fork a game."""
        index = torch.as_tensor(index, dtype=torch.int64, device=self.device)
        return self._map(lambda v, dim: v.index_select(dim, index))

    def tensors(self) -> dict[str, torch.Tensor]:
        """The state tensors by their stored names (``GameBatch(rules, kernels, **them)``
        rebuilds the batch around the same tensors)."""
        return {name: getattr(self, name) for name in (*_STATE, *_FLAT)}

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
        return GameBatch(first.rules, first.kernels, **state)

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
    def done(self) -> torch.Tensor:
        """[B] bool: the round is over (also set by a sampler that cuts a game short)."""
        return self._done

    @done.setter
    def done(self, done: torch.Tensor) -> None:
        self._done = done
        self._memo.pop("legal_mask", None)  # finished games have no legal action

    @property
    def compiled(self) -> bool:
        """The rules run as compiled kernels (``kernels="compiled"``)."""
        return self.kernels == "compiled"

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
        arithmetic rather than comparisons (:mod:`lostcities_cfr.game.legal` says why).
        Computed once per state: later calls return the same tensor, so never change it
        in place.
        """
        if "legal_mask" not in self._memo:
            self._memo["legal_mask"] = self._legal_mask()
        return self._memo["legal_mask"]

    def _legal_mask(self) -> torch.Tensor:
        tables = lookup_tables(self.rules, self.device)
        cards = (self._hand_known, self._top, self._pile_len)
        args = (self.rules, tables, *cards, self._turn, self._discarded, self.done)
        mask = run_compiled(fused.legal_mask, *args) if self.compiled else legal.legal_mask(*args)
        return mask.t()  # [B, A]: a view of the [A, B] mask

    def step(self, actions: torch.Tensor, check: bool = True) -> None:
        """Apply one action ([B] int64) in every unfinished game, in place.

        Finished games ignore their entry. With ``check`` (the default) an
        illegal action in any unfinished game raises :class:`IllegalActionError`
        naming the game, the action and the reason, and no game changes.
        Callers that draw actions from :meth:`legal_mask` may pass
        ``check=False`` to skip the test (and its device sync).
        """
        rules, B = self.rules, self.batch_size
        actions = action_ids(actions, B, self.device)
        if check:
            self._check(actions)
        tables, offsets = lookup_tables(rules, self.device), flat_offsets(rules, self.device, B)
        args = (rules, tables, offsets, actions, *self.tensors().values())
        new = run_compiled(advance, *args) if self.compiled else advance(*args)
        self._discarded, self._deck_pos, self._turn, self.done = new
        self._memo.clear()  # a new state

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
        The encoder lives in :func:`lostcities_cfr.game.encoding.encode_batch`. The player
        to move's features are computed once per state: later calls return the same
        tensor, so never change it in place.
        """
        if player is not None:
            return self._encode(player)
        if "encode" not in self._memo:
            self._memo["encode"] = self._encode(None)
        return self._memo["encode"]

    def encode_history(self) -> torch.Tensor:
        """[B, H] float32 features of the whole state for a history value network
        (:func:`lostcities_cfr.game.encoding.encode_history`)."""
        return encode_history(self)

    def _encode(self, player: torch.Tensor | None) -> torch.Tensor:
        if not self.compiled:
            return encode_batch(self, player)
        return run_compiled(
            fused.encode,
            self.rules,
            lookup_tables(self.rules, self.device),
            self._hand_known,
            self._played,
            self._piles,
            self._pile_len,
            self._turn,
            self._deck_pos,
            self._discarded,
            player,
        ).t()


def expedition_scores(rules: Rules, counts: torch.Tensor) -> torch.Tensor:
    """[..., C] int64: the score of each expedition from copies per card type ``[..., T]``.

    ``(sum of face values - cost) * (1 + wagers)``, plus the bonus from
    ``bonus_threshold`` cards on; 0 for an expedition that was never started.
    """
    counts = counts.reshape(*counts.shape[:-1], rules.n_colors, rules.n_ranks + 1).long()
    n_cards = counts.sum(-1)
    face = lookup_tables(rules, counts.device).face.view(-1)
    score = ((counts * face).sum(-1) - rules.expedition_cost) * (1 + counts[..., 0])
    score = score + rules.bonus * (n_cards >= rules.bonus_threshold)
    return torch.where(n_cards > 0, score, 0)
