"""Compiled kernels: the engine's legal mask and encoder as pure functions of the state,
and the helpers that run them, and any work over a whole batch, through ``torch.compile``.

A :class:`~lostcities_cfr.game.batched.GameBatch` made with ``kernels="compiled"`` runs
its legal mask, its encoder and its step through ``torch.compile`` (Inductor): each
becomes one to four generated kernels where the eager code makes 60 to 180 torch
operator calls, and on a GPU every call is a kernel launch (``docs/performance.md``,
"Compiled kernels"). The step compiles as it is (``advance.advance``); the mask and
the encoder are written again here because the eager ones write each block into a view
of one buffer (``out=``), which Inductor turns into scalar loops over the whole buffer
(100 times slower). These build each block apart and concatenate them: the same values,
bit for bit (``tests/game/test_fused.py`` holds them equal to the eager ones over random
games of three rules variants), and a plainer read of the rules than the eager code,
which is shaped by what the CPU vectorises. :func:`compiled_on` compiles other work over
a batch (the heuristic agent, the history features, ESCHER's step masks) together with
the engine's.

Eager stays the default: on two CPU cores an ESCHER walk on compiled kernels makes a third
of the operator calls but takes 1.07 times as long at 1,024 walkers and 1.4 times at 8
(``docs/performance.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import torch

from lostcities_cfr.game.packed import Tables
from lostcities_cfr.game.rules import Rules

# The functions compiled here call a few ``functools.cache``d ones (the lookup tables of a
# rules variant), which Dynamo traces through with a warning: they are pure functions of
# their arguments, so tracing them computes what the cache holds.
warnings.filterwarnings("ignore", message="Dynamo detected a call to a `functools.lru_cache`")

KERNELS = ("eager", "compiled")
"""How a ``GameBatch`` runs its rules: eager torch calls, or ``torch.compile``d kernels."""

F = TypeVar("F", bound=Callable)


@cache
def compiled(fn: F) -> F:
    """``fn`` compiled once for every batch size (``dynamic=True``: a forking traversal
    changes the batch at every step, and one graph per size would recompile forever)."""
    return torch.compile(fn, dynamic=True)


def run_compiled(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` through its compiled form; traced as it is inside another compiled
    function (``compiled_on``), whose graph it joins."""
    if torch.compiler.is_compiling():
        return fn(*args)
    return compiled(fn)(*args)


def compiled_on(batch: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(batch, *args)`` compiled, for work over a whole batch beyond the engine (an
    agent's rules, the history features): the batch enters as its state tensors and is
    rebuilt inside, with compiled kernels, so the engine's calls fuse with ``fn``'s."""
    return run_compiled(_rebuilt(fn), type(batch), batch.rules, batch.tensors(), *args)


@cache
def _rebuilt(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(cls: type, rules: Rules, tensors: dict[str, torch.Tensor], *args: Any) -> Any:
        return fn(cls(rules, "compiled", **tensors), *args)

    return run


def check_kernels(kernels: str) -> str:
    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}; expected one of: {', '.join(KERNELS)}")
    return kernels


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
    """[A, B] bool: the legal actions of the player to move, as ``GameBatch.legal_mask``."""
    C, R1 = rules.n_colors, rules.n_ranks + 1
    hand_known, top, pile_len, discarded = _wide(hand_known, top, pile_len, discarded)
    player = ((turn >> 1) & 1).bool()  # [B]
    draw_turn = (turn & 1).bool() & ~done  # [B]
    card_turn = ~(turn & 1).bool() & ~done
    held = torch.where(player, hand_known[1], hand_known[0]) > 0  # [T, B]
    discard = held & card_turn  # [T, B]
    top_rank = torch.where(player, top[1], top[0]).view(C, 1, -1)  # [C, 1, B]
    # a wager (key 1) needs an empty expedition, a number (key 2r) a rank above the top
    playable = (tables.play_key > 2 * top_rank).reshape(C * R1, -1)  # [T, B]
    not_discarded = tables.colors != discarded  # [C, B]
    piles = not_discarded & (pile_len > 0) & draw_turn  # [C, B]
    return torch.cat([discard & playable, discard, draw_turn[None], piles])


def encode(
    rules: Rules,
    tables: Tables,
    hand_known: torch.Tensor,  # [2, T, B] int8
    played: torch.Tensor,  # [2, C, B] int16/32 packed expeditions
    piles: torch.Tensor,  # [L, C, B] int8
    pile_len: torch.Tensor,  # [C, B] int8
    turn: torch.Tensor,  # [B] int32
    deck_pos: torch.Tensor,  # [B] int32
    discarded: torch.Tensor,  # [B] int8
    viewer: torch.Tensor | None,  # [B] 0/1, None: the player to move
) -> torch.Tensor:
    """[F, B] float32 features (``docs/encoding.md``), as ``encoding.encode_batch`` builds them."""
    T, C, R1, L = rules.n_types, rules.n_colors, rules.n_ranks + 1, rules.pile_capacity
    hand_known, played, piles, pile_len, discarded = _wide(
        hand_known, played, piles, pile_len, discarded
    )
    to_move = (turn >> 1) & 1  # [B]
    mine = (to_move if viewer is None else viewer).bool()  # [B] True: the viewer is player 1

    def own_first(state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.where(mine, state[1], state[0]), torch.where(mine, state[0], state[1])

    own_hand, opp_hand = own_first(hand_known)  # [T, B] each: copies + KNOWN * public copies
    hand = own_hand & tables.hand_bits
    opp_known = opp_hand >> tables.known_shift
    own_played, opp_played = own_first(played)  # [C, B] each
    bits = tables.played_shift, tables.played_mask  # [R1, 1] each

    def unpacked(packed: torch.Tensor) -> torch.Tensor:  # [C, B] -> [T, B] copies per type
        return ((packed.unsqueeze(1) >> bits[0]) & bits[1]).reshape(T, -1)

    # pile_sequence: rank index + 1 in the occupied slots, 0 above
    slot = torch.arange(L, device=turn.device).view(1, L, 1)
    sequence = (piles.transpose(0, 1) + 1) * (pile_len.unsqueeze(1) > slot)  # [C, L, B]
    rank_ids = tables.rank_ids.view(1, 1, R1, 1)
    counts = (sequence.unsqueeze(2) == rank_ids).sum(1).reshape(T, -1)  # [T, B]
    top_slot = (pile_len.long() - 1).clamp(min=0).unsqueeze(1)  # [C, 1, B]
    top = sequence.gather(1, top_slot)  # [C, 1, B], 0: empty pile
    tops = (top == rank_ids.view(1, R1, 1)).reshape(T, -1)  # [T, B]
    own_exp, opp_exp = unpacked(own_played), unpacked(opp_played)
    unseen = tables.copies - (hand + own_exp + opp_exp + counts) - opp_known
    phase = (turn & 1).bool()
    turn_and_seat = torch.stack([~phase, phase, mine == to_move.bool(), ~mine])  # [4, B]
    discard = discarded == tables.discard_ids  # [C + 1, B]
    # deck_fraction, turn and pile_draws: see encoding.encode_batch
    dealt = deck_pos - 2 * rules.hand_size
    count_blocks = torch.stack([deck_pos - rules.deck_size, turn, (turn >> 1) - dealt])
    return torch.cat(
        [
            torch.cat([hand, own_exp, opp_exp, counts, tops]).float(),
            sequence.reshape(C * L, -1).float() / tables.rank_divisor,
            torch.cat([opp_known, unseen]).float(),
            count_blocks.float() / tables.count_divisors,
            torch.cat([turn_and_seat, discard]).float(),
        ]
    )


def _wide(*state: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The int8 and int16 state as int32: Inductor's CPU kernels vectorise int32 arithmetic
    and not int8 (the encoder ran 6 times faster so at 1,024 games, the same values)."""
    return tuple(tensor.to(torch.int32) for tensor in state)
