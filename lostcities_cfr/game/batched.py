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
natural batch-first views (``hands`` is ``[B, 2, T]``) without copying.

State (``T`` card types, ``C`` colours, ``L`` pile capacity, ``N`` deck size),
as stored / as the batch-first property shows it:

=================  ==========================  ================================================
``hands``          int8 [2, T, B] / [B, 2, T]  copies of each type in each player's hand
``expeditions``    int8 [2, T, B] / [B, 2, T]  copies of each type in each player's expeditions
``piles``          int8 [C, L, B] / [B, C, L]  rank index in each pile slot, bottom first
``pile_len``       int64 [C, B] / [B, C]       cards in each discard pile
``deck``           int8 [N, B] / [B, N]        the shuffle in draw order; slot ``deck_pos`` is next
``known``          int8 [2, T, B] / [B, 2, T]  public copies in each hand (taken from a pile)
``deck_pos``       int64 [B]                   position of the next deck card (``N``: empty)
``turn``           int64 [B]                   half-turns (decisions) played
``discarded``      int64 [B]                   colour discarded this turn, -1 if none
``done``           bool [B]                    the round is over
=================  ==========================  ================================================

int8 keeps the per-type counts (at most ``n_wagers``) compact so that large
batches of forked games stay cheap to copy; indices are int64 because torch
indexes with int64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import torch

from lostcities_cfr.errors import IllegalActionError
from lostcities_cfr.game.encoding import feature_blocks, feature_size
from lostcities_cfr.game.reference import GameState
from lostcities_cfr.game.rules import Rules


@dataclass(frozen=True)
class _Tables:
    """Constant lookup tensors of one rules variant on one device (batch-last shapes)."""

    play_key: torch.Tensor  # [T, 1] int8: 1 for a wager, 2r for rank index r
    face: torch.Tensor  # [R + 1, 1] int64 face value per rank index
    rank_index: torch.Tensor  # [R + 1, 1] int8
    copies: torch.Tensor  # [T, 1] float32
    colors: torch.Tensor  # [C, 1] int64
    color_base: torch.Tensor  # [C, 1, 1] int64: type id of each colour's wager
    full_deck: torch.Tensor  # [N] int8, sorted
    action_kind: torch.Tensor  # [A] int64: 0 play, 1 discard, 2 draw deck, 3 draw pile
    action_color: torch.Tensor  # [A] int64: colour of the card or pile (0 for the deck)
    action_type: torch.Tensor  # [A] int64: card type played or discarded (0 for draws)
    action_rank: torch.Tensor  # [A] int8: rank index of that card


@cache
def _tables(rules: Rules, device: torch.device) -> _Tables:
    C, R1, T = rules.n_colors, rules.n_ranks + 1, rules.n_types
    ranks = torch.arange(T, device=device) % R1
    # A card is playable iff play_key > 2 * top, where top is the highest rank index in
    # the expedition (0: empty or wagers only): a number card must beat the top, a wager
    # (key 1) needs top == 0. One comparison instead of two.
    play_key = torch.where(ranks == 0, 1, 2 * ranks).to(torch.int8)
    kinds = [0] * T + [1] * T + [2] + [3] * C
    colors = [t // R1 for t in range(T)] * 2 + [0] + list(range(C))
    card_types = torch.tensor([*range(T), *range(T)] + [0] * (C + 1), device=device)
    return _Tables(
        play_key=play_key.view(T, 1),
        face=torch.tensor([rules.face_value(r) for r in range(R1)], device=device).view(R1, 1),
        rank_index=torch.arange(R1, device=device, dtype=torch.int8).view(R1, 1),
        copies=torch.tensor([float(rules.copies(t)) for t in range(T)], device=device).view(T, 1),
        colors=torch.arange(C, device=device).view(C, 1),
        color_base=(torch.arange(C, device=device) * R1).view(C, 1, 1),
        full_deck=torch.tensor(rules.full_deck(), dtype=torch.int8, device=device),
        action_kind=torch.tensor(kinds, device=device),
        action_color=torch.tensor(colors, device=device),
        action_type=card_types,
        action_rank=(card_types % R1).to(torch.int8),
    )


_STATE = ("_hands", "_expeditions", "_piles", "_pile_len", "_deck", "_known")
_FLAT = ("deck_pos", "turn", "discarded", "done")


class GameBatch:
    """B games in lockstep. Build with :meth:`new` or :meth:`from_states`."""

    def __init__(self, rules: Rules, **state: torch.Tensor) -> None:
        """Low-level: the batch-last tensors named in the module docstring (with ``_``)."""
        missing = set(_STATE + _FLAT) - set(state)
        if missing:
            raise ValueError(f"GameBatch needs state tensors {sorted(missing)}")
        self.rules = rules
        for name in _STATE + _FLAT:
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
        zeros["deck_pos"] += 2 * H
        return cls(rules, **{k: v.to(device) for k, v in zeros.items()})

    @staticmethod
    def _zeros(rules: Rules, B: int, device: torch.device) -> dict[str, torch.Tensor]:
        T, C, L, N = rules.n_types, rules.n_colors, rules.pile_capacity, rules.deck_size

        def z(*shape: int, dtype: torch.dtype = torch.int8) -> torch.Tensor:
            return torch.zeros(*shape, dtype=dtype, device=device)

        return {
            "_hands": z(2, T, B),
            "_expeditions": z(2, T, B),
            "_piles": z(C, L, B),
            "_pile_len": z(C, B, dtype=torch.int64),
            "_deck": z(N, B),
            "_known": z(2, T, B),
            "deck_pos": z(B, dtype=torch.int64),
            "turn": z(B, dtype=torch.int64),
            "discarded": torch.full((B,), -1, dtype=torch.int64, device=device),
            "done": z(B, dtype=torch.bool),
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
                z["_piles"][c, : len(ranks), b] = torch.tensor(ranks, dtype=torch.int8)
                z["_pile_len"][c, b] = len(ranks)
            z["deck_pos"][b] = N - len(s.deck)
            z["_deck"][N - len(s.deck) :, b] = torch.tensor(s.deck, dtype=torch.int8)
            z["turn"][b] = s.turn
            z["discarded"][b] = -1 if s.discarded_color is None else s.discarded_color
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
        """[B, 2, T] int8 view."""
        return self._hands.permute(2, 0, 1)

    @property
    def expeditions(self) -> torch.Tensor:
        """[B, 2, T] int8 view."""
        return self._expeditions.permute(2, 0, 1)

    @property
    def piles(self) -> torch.Tensor:
        """[B, C, L] int8 view: rank index per slot, bottom first."""
        return self._piles.permute(2, 0, 1)

    @property
    def pile_len(self) -> torch.Tensor:
        """[B, C] int64 view."""
        return self._pile_len.t()

    @property
    def deck(self) -> torch.Tensor:
        """[B, N] int8 view: the shuffle in draw order; slot ``deck_pos`` is next."""
        return self._deck.t()

    @property
    def known(self) -> torch.Tensor:
        """[B, 2, T] int8 view."""
        return self._known.permute(2, 0, 1)

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
        for name in _STATE + _FLAT:
            tensors = [getattr(b, name) for b in batches]
            state[name] = torch.cat(tensors, dim=tensors[0].dim() - 1 if name in _STATE else 0)
        return GameBatch(first.rules, **state)

    @property
    def batch_size(self) -> int:
        return self.turn.shape[0]

    def __len__(self) -> int:
        return self.batch_size

    def __repr__(self) -> str:
        return (
            f"GameBatch(batch_size={self.batch_size}, device={self.device}, "
            f"done={int(self.done.sum())}, rules={self.rules})"
        )

    @property
    def device(self) -> torch.device:
        return self.turn.device

    @property
    def current_player(self) -> torch.Tensor:
        """[B] int64: 0 or 1; a turn is two decisions of the same player."""
        return (self.turn >> 1) & 1

    @property
    def phase(self) -> torch.Tensor:
        """[B] int64: 0 for the card decision (play/discard), 1 for the draw decision."""
        return self.turn & 1

    @property
    def deck_count(self) -> torch.Tensor:
        """[B] int64: cards left in the deck."""
        return self.rules.deck_size - self.deck_pos

    # ---- rules ----------------------------------------------------------------------------
    @staticmethod
    def of_player(state: torch.Tensor, player: torch.Tensor) -> torch.Tensor:
        """``state[player[b], ..., b]`` for a batch-last ``[2, ..., B]`` tensor: [..., B].

        Arithmetic select (``s0 + (s1 - s0) * p``): on CPU it runs about five times
        faster than ``torch.where`` with a broadcast condition.
        """
        p = player.to(state.dtype)
        return state[0] + (state[1] - state[0]) * p

    def legal_mask(self) -> torch.Tensor:
        """[B, A] bool: the legal actions of the player to move; all False in finished games.

        The result is a transposed view of a contiguous [A, B] tensor (batch-last,
        like the state); index it as [B, A] as usual. Built from 0/1 int8
        arithmetic rather than comparisons, which torch does not vectorise for int8.
        """
        rules, B = self.rules, self.batch_size
        T, C, R1 = rules.n_types, rules.n_colors, rules.n_ranks + 1
        tables = _tables(rules, self.device)
        player = self.current_player
        held = self.of_player(self._hands, player).clamp_max(1)  # [T, B] 0/1
        own = self.of_player(self._expeditions, player).clamp_max(1).view(C, R1, B)
        top = (own * tables.rank_index).amax(dim=1)  # [C, B] highest rank index per colour
        playable = (tables.play_key - 2 * top.repeat_interleave(R1, dim=0)).clamp(0, 1)
        card_turn = (~self.done & (self.turn % 2 == 0)).to(torch.int8)  # [B]
        draw_turn = (~self.done & (self.turn % 2 == 1)).to(torch.int8)
        pile_ok = (self._pile_len > 0) & (tables.colors != self.discarded)  # [C, B]
        mask = torch.empty(rules.n_actions, B, dtype=torch.int8, device=self.device)
        torch.mul(held, card_turn, out=mask[T : 2 * T])
        torch.mul(mask[T : 2 * T], playable, out=mask[:T])
        mask[2 * T] = draw_turn
        torch.mul(pile_ok.to(torch.int8), draw_turn, out=mask[2 * T + 1 :])
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
        T, R1, L = rules.n_types, rules.n_ranks + 1, rules.pile_capacity
        actions = torch.as_tensor(actions, device=self.device).long()
        if actions.shape != (B,):
            raise ValueError(f"actions must have shape [{B}], got {list(actions.shape)}")
        if check:
            self._check(actions)
        tables = _tables(rules, self.device)
        games = torch.arange(B, device=self.device)
        player = self.current_player
        active = ~self.done
        card = active & (self.turn & 1 == 0)
        draw = active & (self.turn & 1 == 1)
        a = torch.where(active, actions, 0)
        # decode through lookup tables: integer division is not vectorised on CPU
        kind = tables.action_kind.index_select(0, a)  # [B] 0 play, 1 discard, 2 deck, 3 pile
        color = tables.action_color.index_select(0, a)  # [B] the card's or the pile's colour
        t_card = tables.action_type.index_select(0, a)  # [B] the card played or discarded
        is_play = card & (kind == 0)
        is_discard = card & (kind == 1)
        is_deck = draw & (kind == 2)
        is_pile = draw & (kind == 3)

        # the card a draw takes: the deck's next, or the top of pile ``color``
        length_flat = color * B + games  # [B] into [C, B]
        length = torch.take(self._pile_len, length_flat)
        top_slot = (length - 1).clamp(min=0)
        t_pile = color * R1 + torch.take(self._piles, (color * L + top_slot) * B + games).long()
        next_card = self.deck_pos.clamp(max=rules.deck_size - 1) * B + games
        t_drawn = torch.where(is_deck, torch.take(self._deck, next_card).long(), t_pile)

        # hands: -1 for the card played or discarded, +1 for the card drawn
        t_hand = torch.where(card, t_card, t_drawn)
        hand_flat = (player * T + t_hand) * B + games  # [B] into [2, T, B] tensors
        self._hands.put_(hand_flat, draw.char() - card.char(), accumulate=True)
        self._expeditions.put_(hand_flat, is_play.char(), accumulate=True)
        # a card leaving a hand makes one public copy private again; a pile draw makes one public
        known = torch.take(self._known, hand_flat)
        self._known.put_(
            hand_flat, torch.where(card, (known - 1).clamp(min=0), known + is_pile.char())
        )

        # piles: push the discarded card onto slot ``length``, pop the drawn one
        write = (color * L + length.clamp(max=L - 1)) * B + games  # [B] into [C, L, B]
        rank = tables.action_rank.index_select(0, a)
        self._piles.put_(write, torch.where(is_discard, rank, torch.take(self._piles, write)))
        self._pile_len.put_(length_flat, is_discard.long() - is_pile.long(), accumulate=True)

        self.discarded = torch.where(active, torch.where(is_discard, color, -1), self.discarded)
        self.deck_pos = self.deck_pos + is_deck.long()
        self.turn = self.turn + active.long()
        self.done = self.done | (self.deck_pos >= rules.deck_size) | (self.turn >= rules.max_turns)

    def _check(self, actions: torch.Tensor) -> None:
        A = self.rules.n_actions
        in_range = (actions >= 0) & (actions < A)
        legal = self.legal_mask().gather(1, actions.clamp(0, A - 1)[:, None]).squeeze(1)
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
        C, R1, L = rules.n_colors, rules.n_ranks + 1, rules.pile_capacity
        tables = _tables(rules, self.device)
        blocks = feature_blocks(rules)
        viewer = self.current_player if player is None else player
        opponent = 1 - viewer
        out = torch.empty(feature_size(rules), B, device=self.device)

        slots = torch.arange(L, device=self.device)[:, None]
        in_pile = slots < self._pile_len[:, None, :]  # [C, L, B]
        pile_types = self._piles.long() + tables.color_base  # [C, L, B] type ids
        top_slot = (self._pile_len - 1).clamp(min=0)[:, None]  # [C, 1, B]

        parts = {
            "hand": self.of_player(self._hands, viewer),
            "own_expeditions": self.of_player(self._expeditions, viewer),
            "opp_expeditions": self.of_player(self._expeditions, opponent),
            "opp_known": self.of_player(self._known, opponent),
        }
        for name, value in parts.items():
            out[blocks[name]] = value
        pile_counts = out[blocks["pile_counts"]].zero_()
        pile_counts.scatter_add_(0, pile_types.view(C * L, B), in_pile.view(C * L, B).float())
        pile_tops = out[blocks["pile_tops"]].zero_()
        pile_tops.scatter_(
            0,
            pile_types.gather(1, top_slot).view(C, B),
            (self._pile_len > 0).float(),
        )
        unseen = out[blocks["unseen"]]
        torch.sub(tables.copies, out[blocks["hand"]], out=unseen)
        for name in ("own_expeditions", "opp_expeditions", "pile_counts", "opp_known"):
            unseen -= out[blocks[name]]
        out[blocks["pile_sequence"]] = torch.where(in_pile, (self._piles + 1) / R1, 0.0).view(-1, B)
        out[blocks["deck_fraction"]] = self.deck_count / (rules.deck_size - 2 * rules.hand_size)
        out[blocks["phase"]] = self.turn % 2 == torch.arange(2, device=self.device)[:, None]
        out[blocks["to_move"]] = viewer == self.current_player
        out[blocks["seat"]] = viewer == 0
        discarded = torch.where(self.discarded < 0, C, self.discarded)
        out[blocks["discarded_color"]] = (
            discarded == torch.arange(C + 1, device=self.device)[:, None]
        )
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


def _expand_counts(counts: Sequence[int]) -> list[int]:
    """[2, 0, 1] -> [0, 0, 2]: the sorted ids of a per-type count vector."""
    return [t for t, n in enumerate(counts) for _ in range(n)]


def _split_colors(counts: Sequence[int], per_color: int) -> list[Sequence[int]]:
    return [counts[c * per_color : (c + 1) * per_color] for c in range(len(counts) // per_color)]


def random_legal_actions(
    legal: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """[B] int64: a uniformly random legal action per row of ``legal`` ([B, A] bool).

    One uniform draw per row picks the k-th legal action through a running
    count, far cheaper than drawing A numbers per row. Works batch-last (on
    ``legal.t()``, contiguous for masks from :meth:`GameBatch.legal_mask`),
    where the count is a sum of rows. Rows with no legal action get action 0.
    """
    # int8 counts are enough below 128 actions (classic 106, six colours 127)
    count_dtype = torch.int8 if legal.shape[1] < 128 else torch.int16
    legal_t = legal.t().contiguous().view(torch.int8).to(count_dtype)  # [A, B]; our masks: no copy
    n_legal = legal_t.sum(0, dtype=count_dtype)  # [B]
    u = torch.rand(legal_t.shape[1], generator=generator, device=legal.device)
    k = (u * n_legal).to(count_dtype)  # [B] which legal action, 0-based
    # Hillis-Steele prefix sum over actions: log2(A) whole-row adds instead of a slow scan
    running, spare = legal_t.clone(), torch.empty_like(legal_t)
    shift = 1
    while shift < running.shape[0]:
        spare[:shift] = running[:shift]
        torch.add(running[shift:], running[:-shift], out=spare[shift:])
        running, spare = spare, running
        shift *= 2
    # the (k+1)-th legal action's index = how many prefix counts are <= k
    action = (k + 1 - running).clamp(0, 1).sum(0, dtype=count_dtype)  # [B]
    return torch.where(n_legal > 0, action.long(), 0)
