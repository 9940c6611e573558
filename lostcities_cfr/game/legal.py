"""The legal actions of every game of a batch, as a function of the state tensors.

:meth:`GameBatch.legal_mask <lostcities_cfr.game.batched.GameBatch.legal_mask>` memoises
the mask and calls :func:`legal_mask` here, or, with ``kernels="compiled"``, its compiled
twin :func:`lostcities_cfr.game.fused.legal_mask`, which takes the same arguments and gives
the same values. Like :func:`~lostcities_cfr.game.advance.advance` for the step, it is
apart from the engine because it is the rules' arithmetic on the packed state alone
(``batched.py`` and ``packed.py`` document the layout), shaped by what the CPU vectorises:
0/1 int8 arithmetic rather than comparisons, which torch vectorises for int8 only between
two tensors of the same shape (not with a broadcast or a scalar), written into views of one
buffer.
"""

from __future__ import annotations

import torch

from lostcities_cfr.game.packed import Tables
from lostcities_cfr.game.rules import Rules


def legal_mask(
    rules: Rules,
    tables: Tables,
    hand_known: torch.Tensor,  # [2, T, B] int8
    top: torch.Tensor,  # [2, C, B] int8
    pile_len: torch.Tensor,  # [C, B] int8
    turn: torch.Tensor,  # [B] int32
    discarded: torch.Tensor,  # [B] int8
    done: torch.Tensor,  # [B] bool
) -> torch.Tensor:
    """[A, B] bool: the legal actions of the player to move; all False in finished games."""
    B, device = done.shape[0], done.device
    T, C, R1 = rules.n_types, rules.n_colors, rules.n_ranks + 1
    bits = turn.to(torch.int8).bitwise_and_(3)  # [B] bit 0: phase, bit 1: player
    active = (~done).view(torch.int8)
    draw_turn = bits & active  # [B] 0/1
    card_turn = active - draw_turn
    player = bits >> tables.one
    mask = torch.empty(rules.n_actions, B, dtype=torch.int8, device=device)
    discard, play = mask[T : 2 * T], mask[:T]
    # held (copies clipped to 1) on a card turn: min(hand, weight) per player, with
    # weights 0/1 of which at most one is 1, then the larger; min/max run at copy speed,
    # where int8 multiplication does not (no 8-bit multiply in AVX2). ``play`` is scratch.
    held_1 = player & card_turn  # [B] 1 where player 1 plays or discards
    torch.minimum(hand_known[0], card_turn - held_1, out=discard)
    torch.minimum(hand_known[1], held_1, out=play)
    torch.maximum(discard, play, out=discard)
    own_top = torch.addcmul(top[0], top[1] - top[0], player)  # [C, B] the player's tops
    torch.sub(tables.play_key, (own_top + own_top).view(C, 1, B), out=play.view(C, R1, B))
    torch.clamp(play, min=tables.zero, max=discard, out=play)  # playable and discardable
    mask[2 * T] = draw_turn
    # a pile is drawable when it is not empty and was not discarded to this turn
    not_discarded = (tables.colors - discarded).bool()  # [C, B]
    piles = mask[2 * T + 1 :]
    torch.mul(not_discarded, draw_turn, out=piles)
    torch.clamp(pile_len, max=piles, out=piles)
    return mask.view(torch.bool)
