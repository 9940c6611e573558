"""Uniformly random legal actions for a whole batch: what the ``random`` agent plays, and
how tests and benchmarks drive games of the batched engine."""

from __future__ import annotations

from functools import cache

import torch


def random_legal_actions(
    legal: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """[B] int64: a uniformly random legal action per row of ``legal`` ([B, A] bool).

    One 16-bit draw r per row picks the k-th legal action, k = n - 1 - (r * n >> 16)
    (n legal actions; each k has probability within 2**-16 of 1/n), through a running
    count, far cheaper than drawing A numbers per row. r is row b's 16 bits of the
    int64 words ``random_(-2**63, None)`` draws, word b // 4, little-endian: half as
    many generator calls as ``torch.rand(B)``. Works batch-last (on ``legal.t()``,
    contiguous for masks from
    :meth:`~lostcities_cfr.game.batched.GameBatch.legal_mask`), where the count is a sum
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
