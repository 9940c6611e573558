"""One action in every game of a batch, as a function of the state tensors.

:meth:`GameBatch.step <lostcities_cfr.game.batched.GameBatch.step>` checks its actions and
calls :func:`advance`, eagerly or through ``torch.compile`` (``kernels="compiled"``,
:mod:`lostcities_cfr.game.fused`), which takes it as it is: a function of tensors. The
state's layout and the flat offsets it updates are documented in ``batched.py`` and
``packed.py``.
"""

from __future__ import annotations

import torch

from lostcities_cfr.game.packed import ACTION8, KNOWN, Offsets, Tables
from lostcities_cfr.game.rules import Rules


def advance(
    rules: Rules,
    tables: Tables,
    offsets: Offsets,
    actions: torch.Tensor,
    hand_known: torch.Tensor,
    played: torch.Tensor,
    piles: torch.Tensor,
    pile_len: torch.Tensor,
    deck: torch.Tensor,
    top: torch.Tensor,
    deck_pos: torch.Tensor,
    turn: torch.Tensor,
    old_discarded: torch.Tensor,
    done: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """``actions`` [B] in every game (``GameBatch.step`` without its checks): updates the
    card state (``hand_known`` ... ``top``) in place and returns the new ``discarded``,
    ``deck_pos``, ``turn`` and ``done``."""
    B = actions.shape[0]
    games = offsets.games
    active = ~done
    # legal actions imply the phase, so the action alone says what happens; finished
    # games (which may pass anything) get the no-op action A (a copy: never the caller's)
    a = actions.to(torch.int32, copy=True).masked_fill_(done, rules.n_actions)
    effect = tables.action_effects.index_select(0, a)  # [B] int64: 8 int8 fields
    effect = effect.view(torch.int8).view(B, len(ACTION8)).unbind(1)
    discarded, deck_draw, pile_draw, pile_delta, hand_delta, card, play_rank, discard_rank = effect
    # the action and the player to move (turn % 4 is player * 2 + phase)
    player_action = torch.add(a, turn & 3, alpha=rules.n_actions + 1)

    # Every update is one index_select / index_add_ on a flat view, one index per game
    # (``row * B + game``). An action that leaves a tensor alone addresses row 0 of its
    # own column, with a zero update: those reads and writes stay in cache and in order,
    # where random rows of the large state tensors miss it.
    # the pile a discard fills or a pile draw empties, and its slot
    length_at = offsets.pile_row.index_select(0, a) + games  # [B] into [C, B]
    length = pile_len.view(-1).index_select(0, length_at)  # [B] int8
    slot = length * (pile_delta * pile_delta) - pile_draw  # discard: length, draw: length - 1
    # slot-major piles ([L, C, B]): the slot's row is the pile's [C, B] row + slot * C * B
    pile_at = torch.add(length_at, slot, alpha=rules.n_colors * B)
    top_rank = piles.view(-1).index_select(0, pile_at) * pile_draw  # [B] int8
    # the card a draw takes: the deck's next, or the top of the pile
    deck_at = torch.addcmul(games, deck_pos, deck_draw, value=B)  # [B] into [N, B]
    drawn = torch.addcmul(top_rank, deck.view(-1).index_select(0, deck_at), deck_draw)

    # hands, expeditions and public copies at the card given or taken
    hand_row = offsets.hand_row.index_select(0, player_action)
    hand_row.add_(drawn, alpha=B)
    hands_flat = hand_known.view(-1)
    # a card leaving a hand makes one public copy private again (if it has one); a pile
    # draw makes one public. Draws read row 0 of their column, and ignore it.
    given = hands_flat.index_select(0, torch.addcmul(games, hand_row, card))  # [B] int8
    public = pile_draw - card * (given >> tables.known_shift).clamp_(max=1)  # [B] -1/0/1
    hands_flat.index_add_(0, hand_row + games, torch.add(hand_delta, public, alpha=KNOWN))
    # a play adds its card to the expedition and raises its top (legal plays never lower it)
    played_at = offsets.play_row.index_select(0, player_action) + offsets.games64
    played.view(-1).index_add_(0, played_at, tables.action_played.index_select(0, a))
    top.view(-1).scatter_reduce_(0, played_at, play_rank, "amax")

    # piles: a discard fills slot ``length``, a pile draw clears the top slot, so that
    # slots at and above ``pile_len`` hold 0 and both are one addition
    piles.view(-1).index_add_(0, pile_at, discard_rank - top_rank)
    pile_len.view(-1).index_add_(0, length_at, pile_delta)

    deck_pos = deck_pos + deck_draw
    turn = turn + active
    done = done | (deck_pos >= rules.deck_size) | (turn >= rules.max_turns)
    return torch.where(active, discarded, old_discarded), deck_pos, turn, done
