"""Setup shared by the sampler tests: mixed strategies, a branching root, runs from one root."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from traversal_reference import (
    TINY,
    CountingQueue,
    ExactTree,
    advance,
    assert_unbiased,
    buffers,
    context,
    held,
    make_queue,
    repeated,
    rows_at,
)

from lostcities_cfr.cfr import ReservoirBuffer, regret_matching
from lostcities_cfr.cfr.traversal import TraversalStats
from lostcities_cfr.game import GameState
from lostcities_cfr.game.encoding import feature_blocks

MIXED_HEADS = (regret_matching, regret_matching)  # mixed strategies for both players
SEAT = feature_blocks(TINY)["seat"].start  # the feature that is 1 where the mover is player 0
# Player 0 to move with one deck card left and a discard pile to draw from: each of its
# card actions leads to a draw decision with two choices, so the traverser's second
# decisions branch too (and, for outcome sampling, importance weights matter).
BRANCHING_ROOT = advance(TINY, seed=82, decisions=4)


def run_from(
    sampler, root: GameState, n: int, capacity: int = 200_000, seed: int = 0
) -> tuple[TraversalStats, ReservoirBuffer, ReservoirBuffer, CountingQueue]:
    """``n`` traversals of ``root`` for player 0 (iteration 1), both players on
    :data:`MIXED_HEADS`, into fresh buffers of ``capacity`` rows.

    Returns ``(stats, advantage, strategy, queue)``; the queue counts the network calls.
    """
    queue = make_queue(MIXED_HEADS)
    advantage, strategy = buffers(capacity)
    ctx = context(queue, advantage, strategy, seed=seed)
    sampler.traverse_games(repeated(root, n), ctx)
    return ctx.stats, advantage, strategy, queue


def second_decisions(root: GameState) -> Iterator[GameState]:
    """The traverser's decisions after each of its first actions at ``root``."""
    for action in root.legal_actions():
        state = root.clone()
        state.apply(action)
        yield state


def assert_unbiased_where_sampled(
    advantage: ReservoirBuffer, states: Iterable[GameState], min_rows: int = 300
) -> None:
    """At each of ``states`` with more than ``min_rows`` advantage rows, the rows' mean is
    player 0's exact regret v(h, a) - v(h) under :data:`MIXED_HEADS`.

    Nodes with fewer rows are skipped: the strategy reaches them too rarely to test.
    """
    exact = ExactTree(make_queue(MIXED_HEADS), 0)
    for state in states:
        _, _, samples = rows_at(advantage, state)
        if len(samples) > min_rows:
            assert_unbiased(samples, exact.regrets(state))


def assert_the_context_generator_alone_decides(sampler, n: int, seed: int = 3) -> None:
    """``n`` traversals from a context seeded ``seed`` write the same rows under two global
    torch seeds. Torch is seeded after the networks are built (``make_queue`` seeds it
    itself), so only the sampler's draws could see the difference."""
    runs = []
    for global_seed in range(2):
        advantage, strategy = buffers()
        ctx = context(make_queue(MIXED_HEADS), advantage, strategy, seed=seed)
        torch.manual_seed(global_seed)
        sampler.traverse(ctx, n)
        runs.append(held(advantage) + held(strategy))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)
