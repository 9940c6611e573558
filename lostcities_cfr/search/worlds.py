"""Worlds consistent with what the player to move has seen: determinization for search.

A *world* is a full state that the player to move cannot tell from the real one: its own
hand, both expeditions, the discard piles, the turn and the opponent's *known* cards (those
it saw the opponent take from a pile, ``GameState.known``) are as they are; the cards it has
not seen (the ``unseen`` block of its features: copies of each type minus its hand, both
expeditions, the piles and the opponent's known cards) are dealt at random, first the
opponent's hidden hand cards, then the deck in draw order. Each unseen card's place is
uniform given what the player saw, as in perfect-information Monte Carlo (Ginsberg's GIB for
Bridge; Buro et al. for Skat), unless a learned belief weighs the opponent's hand
(:func:`belief_keys`, :mod:`~lostcities_cfr.search.belief`).

Both samplers draw one uniform key per unseen card (listed by type id, ascending) and deal the
cards in the order of their keys, so the same keys deal the same world:

- :func:`deal_world` deals one :class:`~lostcities_cfr.game.reference.GameState` in plain
  Python, written to be read;
- :func:`deal_worlds` deals ``W`` worlds of every game of a
  :class:`~lostcities_cfr.game.batched.GameBatch` at once, with no loop over games or worlds
  (the search's hot path). ``tests/search/test_worlds.py`` holds the two equal.

Neither reads the hidden cards of the state it is given: the batched one reads the unseen
counts from the player's own features (``GameBatch.encode``) and overwrites the opponent's
hand and the whole deck, so a world is the same function of the keys whatever the opponent
really holds. Deck slots already drawn are zeroed in a world (nothing reads them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple

import torch

from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.encoding import feature_blocks
from lostcities_cfr.game.packed import KNOWN
from lostcities_cfr.game.reference import GameState


def unseen_cards(state: GameState) -> list[int]:
    """The type ids the player to move has not seen, ascending (one entry per copy)."""
    rules, p = state.rules, state.current_player
    counts = [rules.copies(t) for t in range(rules.n_types)]
    for t in state.hands[p]:
        counts[t] -= 1
    for expeditions in state.expeditions:
        for color, ranks in enumerate(expeditions):
            for r in ranks:
                counts[rules.type_id(color, r)] -= 1
    for color, pile in enumerate(state.piles):
        for r in pile:
            counts[rules.type_id(color, r)] -= 1
    for t, n in enumerate(state.known[1 - p]):
        counts[t] -= n
    return [t for t, n in enumerate(counts) for _ in range(n)]


def deal_world(state: GameState, keys: Sequence[float]) -> GameState:
    """The world ``keys`` deal from ``state``: one key per card of :func:`unseen_cards`.

    The unseen cards sorted by their keys (ties keep type order) fill the opponent's hidden
    hand first, then the deck from its top. The opponent keeps its known cards.
    """
    unseen = unseen_cards(state)
    if len(keys) != len(unseen):
        raise ValueError(f"{len(unseen)} unseen cards need as many keys, got {len(keys)}")
    them = 1 - state.current_player
    known = [t for t, n in enumerate(state.known[them]) for _ in range(n)]
    hidden = len(unseen) - len(state.deck)
    dealt = [unseen[j] for j in sorted(range(len(unseen)), key=lambda j: keys[j])]
    world = state.clone()
    world.hands[them] = sorted(known + dealt[:hidden])
    world.deck = dealt[hidden:]
    return world


def sample_world(state: GameState, rng: random.Random) -> GameState:
    """A uniformly random world of ``state`` (:func:`deal_world` with keys from ``rng``)."""
    return deal_world(state, [rng.random() for _ in unseen_cards(state)])


def unseen_counts(batch: GameBatch) -> torch.Tensor:
    """[B, T] int64: copies of each type the player to move has not seen (its features)."""
    unseen = batch.encode()[:, feature_blocks(batch.rules)["unseen"]]
    return unseen.round().long()


def world_keys(batch: GameBatch, worlds: int, generator: torch.Generator) -> torch.Tensor:
    """[B, W, N] float32 uniform keys for :func:`deal_worlds`, drawn on the batch's device."""
    shape = (batch.batch_size, worlds, batch.rules.deck_size)
    return torch.rand(shape, generator=generator, device=batch.device)


class UnseenCards(NamedTuple):
    """The cards the player to move of each game has not seen, listed in type order."""

    cards: torch.Tensor  # [B, N] int64: the type of the j-th one (T past the last)
    absent: torch.Tensor  # [B, N] bool: slots past the last one
    hidden: torch.Tensor  # [B] int64: how many of them the opponent holds (not known ones)


def unseen_card_list(batch: GameBatch) -> UnseenCards:
    """The unseen cards of every game of ``batch``, from the player's own features."""
    N = batch.rules.deck_size
    unseen = unseen_counts(batch)  # [B, T]
    n_unseen = unseen.sum(1)  # [B]
    slots = torch.arange(N, device=batch.device)
    # the j-th unseen card's type: how many cumulative counts lie at or below j
    cards = torch.searchsorted(
        unseen.cumsum(1), slots.expand(len(unseen), N).contiguous(), right=True
    )
    return UnseenCards(cards, slots >= n_unseen[:, None], n_unseen - batch.deck_count)


def opponent_hidden(batch: GameBatch) -> torch.Tensor:
    """[B, T]: the copies of each type in the opponent's hand that the player to move has not
    seen it take (hand less known copies): what a world deals, and what a belief learns."""
    them = 1 - batch.current_player  # [B]
    return (batch.hands - batch.known)[torch.arange(batch.batch_size, device=batch.device), them]


def belief_keys(
    batch: GameBatch, log_weights: torch.Tensor, worlds: int, generator: torch.Generator
) -> torch.Tensor:
    """[B, W, N] keys for :func:`deal_worlds` that deal the opponent's hidden hand by weighted
    sampling without replacement, card type ``t`` of weight ``exp(log_weights[b, t])``
    ([B, T]; :mod:`~lostcities_cfr.search.belief`), and the deck's order uniformly among
    the cards left.

    An exponential race (Efraimidis and Spirakis, "Weighted random sampling with a
    reservoir", 2006): each unseen card draws ``E ~ Exp(1)``, and the ``hidden`` cards of
    least ``E / w`` are the hand. The keys put those cards first (keys in [0, 0.5)) and the
    others after ([0.5, 1)), each group in the order of a second uniform key, so the
    dealers deal them as they are. Equal weights deal as :func:`world_keys` does, in
    distribution.
    """
    rules = batch.rules
    B, N, T = batch.batch_size, rules.deck_size, rules.n_types
    cards, absent, hidden = unseen_card_list(batch)  # [B, N], [B, N], [B]
    log_w = log_weights.float().gather(1, cards.clamp(max=T - 1))  # [B, N] each card's
    race, order = torch.rand(2, B, worlds, N, generator=generator, device=batch.device)
    # log(E / w), in logs so that no weight overflows float32
    arrival = torch.log(-torch.log1p(-race)) - log_w[:, None, :]  # [B, W, N]
    arrival = arrival.masked_fill(absent[:, None, :], torch.inf)
    place = arrival.argsort(dim=2).argsort(dim=2)  # [B, W, N] each card's place in the race
    in_hand = place < hidden[:, None, None]
    return torch.where(in_hand, 0.5 * order, 0.5 + 0.5 * order)


def deal_worlds(batch: GameBatch, keys: torch.Tensor) -> GameBatch:
    """``W`` worlds of every game of ``batch``: world ``w`` of game ``b`` is row ``b * W + w``.

    ``keys`` [B, W, N]: key ``j`` of a world belongs to the game's ``j``-th unseen card (in
    type order, as in :func:`deal_world`); keys past the unseen cards are ignored. Finished
    games get worlds too (copies, never read).
    """
    rules = batch.rules
    B, W, N = keys.shape
    T, device = rules.n_types, batch.device
    cards, absent, hidden = unseen_card_list(batch)  # [B, N], [B, N], [B]
    slots = torch.arange(N, device=device)
    # keys of absent cards sort last; a stable sort keeps ties in type order
    order = keys.masked_fill(absent[:, None, :], 2.0).argsort(dim=2, stable=True)  # [B, W, N]
    dealt = cards[:, None, :].expand(B, W, N).gather(2, order)  # [B, W, N] types in deal order

    worlds = batch.select(torch.arange(B, device=device).repeat_interleave(W))
    rows = B * W
    dealt, hidden = dealt.reshape(rows, N), hidden.repeat_interleave(W)  # [R, N], [R]
    # the opponent's hand: its known copies plus the first ``hidden`` dealt cards
    in_hand = (slots < hidden[:, None]).to(torch.int8)  # [R, N]
    hand = torch.zeros(rows, T + 1, dtype=torch.int8, device=device)
    hand.scatter_add_(1, dealt, in_hand)  # absent cards (type T) land in the spare column
    them = 1 - worlds.current_player  # [R]
    known = worlds._hand_known[them, :, torch.arange(rows, device=device)] // KNOWN  # [R, T]
    opponent = (hand[:, :T] + known + KNOWN * known).t()  # [T, R], packed like ``_hand_known``
    is_them = torch.arange(2, device=device)[:, None, None] == them  # [2, 1, R]
    worlds._hand_known = torch.where(is_them, opponent, worlds._hand_known)
    # the deck: slot ``deck_pos + k`` holds dealt card ``hidden + k``; drawn slots hold 0
    deck_pos = worlds.deck_pos  # [R]
    source = (slots - deck_pos[:, None] + hidden[:, None]).clamp(0, N - 1)  # [R, N]
    deck = dealt.gather(1, source).masked_fill_(slots < deck_pos[:, None], 0)
    worlds._deck = deck.to(torch.int8).t().contiguous()
    return worlds
