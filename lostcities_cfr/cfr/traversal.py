"""What every Deep CFR traversal sampler shares: the :class:`Sampler` interface, the
:class:`TraversalContext` it works in, its :class:`TraversalStats`, and the operations of
a traversal step.

A sampler walks many games at once (Deep CFR, Brown, Lerer, Gross & Sandholm,
2019): the walkers are one batch of games (the game protocol,
:class:`~lostcities_cfr.game.protocol.BatchedGames`), one row per
node of every concurrent traversal, and all of them advance in lockstep. At
each step :func:`current_strategies` sends the features and legal masks of all
rows to the inference queue (one submit per network: player 0's rows to
``advantage_p0``, player 1's to ``advantage_p1``) and flushes once; the sampler
then picks actions (:func:`sample_actions`) or forks rows
(``select`` with repeated indices) and steps the whole batch. No
Python loop runs per walker or per node.

The samplers (``docs/algorithms.md`` gives each one's estimator and bias):

- :class:`~lostcities_cfr.cfr.external_sampling.ExternalSampling`: exact
  counterfactual regrets for the dealt game, exponential in its length; for
  tiny rules.
- :class:`~lostcities_cfr.cfr.outcome_sampling.OutcomeSampling`: one sampled
  trajectory per traversal, importance-weighted regrets.
- :class:`~lostcities_cfr.cfr.budgeted_sampling.BudgetedSampling`: a sampled
  trajectory that branches on every legal action at a few traverser nodes and
  values each branch by one playout; bounded cost, for full-size games.

Utilities are the zero-sum ``returns()`` of the traverser (the score
difference) divided by ``utility_scale``, so targets can be kept O(1) for the
networks (for classic rules, where differences run to a few hundred points,
``utility_scale=100`` is a natural choice). Regret matching is invariant to the
scale, so it changes nothing but the size of the regression targets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import torch

from lostcities_cfr.arguments import PositiveFloat, PositiveInt, checked
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.cfr.reservoir import ReservoirBuffer
from lostcities_cfr.game import Rules
from lostcities_cfr.game.fused import run_compiled
from lostcities_cfr.game.lost_cities import as_game
from lostcities_cfr.game.protocol import BatchedGames, Game
from lostcities_cfr.inference import InferenceQueue

ADVANTAGE_NETWORKS = ("advantage_p0", "advantage_p1")  # queue names of each player's network
STRATEGY_NETWORK = "strategy"  # queue name of the average-strategy network
# Samplers drop finished games from their batch once the live ones are at most this
# fraction of it: ``GameBatch.select`` gathers every state tensor along its batch-last
# axis, which costs about as much per row as ``encode()``, so compacting at every step
# in which some game ends would nearly double the engine's share of a node.
COMPACT_BELOW = 0.75


@dataclass
class TraversalStats:
    """Counts and timings of one or more traversal calls (they add up with ``+``)."""

    traversals: int = 0  # trajectories started (games dealt)
    nodes: int = 0  # decision nodes visited = network rows queried
    advantage_rows: int = 0  # rows added to the advantage buffer
    strategy_rows: int = 0  # rows added to the strategy buffer
    seconds: float = 0.0  # wall time of the whole call
    steps: int = 0  # lockstep steps of the walks (one engine step of their batch each)
    host_reads: int = 0  # reads of counts from the device (TraversalContext.read_counts)
    memory_add_seconds: float = 0.0  # time spent inside the buffers' add
    value_rows: int = 0  # rows added to the history value network's buffer
    truncated: int = 0  # trajectories cut short by the sampler (ESCHERSampling.max_decisions)

    def __add__(self, other: TraversalStats) -> TraversalStats:
        return TraversalStats(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(TraversalStats))
        )

    @property
    def nodes_per_s(self) -> float:
        return self.nodes / self.seconds if self.seconds > 0 else 0.0

    @property
    def advantage_rows_per_s(self) -> float:
        """The sampler's yield: advantage rows written per second of traversal."""
        return self.advantage_rows / self.seconds if self.seconds > 0 else 0.0


def current_strategies(
    queue: InferenceQueue,
    games: BatchedGames,
    features: torch.Tensor,
    legal: torch.Tensor,
    rows: torch.Tensor | None = None,
    counts: Sequence[int] | None = None,
) -> torch.Tensor:
    """The current strategy [B, A] of the player to move at ``rows`` of ``games``.

    ``features`` [B, F] and ``legal`` [B, A] bool are those of ``games``; ``rows``
    ([n] int64, default all) are the games that need a strategy, and the others
    get zeros. Rows of player p go to the queue's ``advantage_p`` in one submit,
    and one flush runs both networks. Games started together move in lockstep,
    so usually every row belongs to one player and only that network runs.
    ``counts`` (how many of ``rows`` each player moves in, read already) spares the
    host synchronisation of splitting them by player.
    """
    B, compiled = games.batch_size, games.compiled
    player = games.current_player  # [B]
    if rows is None:
        rows = torch.arange(B, device=legal.device)
    if counts is None:
        asks = [rows[player[rows] == p] for p in range(len(ADVANTAGE_NETWORKS))]  # [n_p] each
    else:
        asks = [
            rows if n == len(rows) else rows[static_rows(player[rows] == p, n, compiled)]
            for p, n in enumerate(counts)
        ]
    if any(0 < len(ask) < B for ask in asks):
        # One transposing copy of the batch-last features into row-major rows, so that
        # gathering rows is a plain row copy. A full batch skips it: the first Linear
        # reads the transposed view as it is.
        features = features.contiguous()
    parts = []
    for name, ask in zip(ADVANTAGE_NETWORKS, asks, strict=True):
        if len(ask) == B:
            parts.append((None, queue.submit(name, features, legal)))
        elif len(ask):
            ticket = queue.submit(name, features.index_select(0, ask), legal.index_select(0, ask))
            parts.append((ask, ticket))
    queue.flush()
    if len(parts) == 1 and parts[0][0] is None:
        return parts[0][1].result()
    sigma = torch.zeros(legal.shape, device=legal.device)
    for ask, ticket in parts:
        sigma.index_copy_(0, ask, ticket.result())
    return sigma


def static_rows(mask: torch.Tensor, count: int, compiled: bool = False) -> torch.Tensor:
    """[count] int64: the indices where ``mask`` [b] holds, ``count`` of them (read already).

    ``nonzero()`` must learn how many there are before it can return them, so on a GPU it
    waits for the device; with the count known its shape is fixed and nothing waits.
    ``compiled`` (a walk on compiled kernels, ``GameBatch``'s ``kernels``): the same rows
    from one generated kernel, where ``nonzero_static`` makes 13 operator calls on a CPU.
    """
    if compiled:
        return run_compiled(_scattered_rows, mask, count)
    return torch.nonzero_static(mask, size=count).squeeze(1)


def _scattered_rows(mask: torch.Tensor, count: int) -> torch.Tensor:
    """``static_rows`` by a scatter: row i goes to slot (rows before it that hold) when it
    holds, else to a spare slot ``count``, which is dropped."""
    slot = torch.where(mask, mask.cumsum(0) - 1, count)  # [b]
    rows = torch.empty(count + 1, dtype=torch.int64, device=mask.device)
    rows.scatter_(0, slot, torch.arange(len(mask), device=mask.device))
    return rows[:count]


def live_rows(
    games: BatchedGames, per_row: Sequence[torch.Tensor]
) -> tuple[BatchedGames, list[torch.Tensor], torch.Tensor, torch.Tensor] | None:
    """The next step's rows of a lockstep walk: ``(games, per_row, alive [b], live [n])``.

    Finished games stay in the batch (they ignore their actions) until the live ones are at
    most ``COMPACT_BELOW`` of it; then ``games`` and the walk's per-row tensors ``per_row``
    ([b, ...] each) are cut down to the live rows. None once every game has ended.
    """
    alive = ~games.done  # [b]
    live = alive.nonzero().squeeze(1)  # [n]
    if len(live) == 0:
        return None
    if len(live) <= COMPACT_BELOW * games.batch_size:
        games, per_row = games.select(live), [tensor[live] for tensor in per_row]
        alive = torch.ones(len(live), dtype=torch.bool, device=live.device)
        live = torch.arange(len(live), device=live.device)
    return games, list(per_row), alive, live


def explore(sigma: torch.Tensor, legal: torch.Tensor, epsilon: float) -> torch.Tensor:
    """``epsilon * uniform(legal) + (1 - epsilon) * sigma``, row by row ([B, A])."""
    return epsilon * uniform_strategy(sigma, legal) + (1 - epsilon) * sigma


def sample_actions(
    probs: torch.Tensor, generator: torch.Generator, compiled: bool = False
) -> torch.Tensor:
    """[B] int64: one action drawn from each row of ``probs`` [B, A].

    Rows must be non-negative with a positive sum (they need not sum to
    exactly 1). Inverse-CDF sampling with ``u`` in (0, 1] never returns an
    action of probability 0, whatever the rounding of the running sum.
    ``compiled``: the inversion as one generated kernel (the draws stay eager: a compiled
    function takes no generator); the same actions.
    """
    u = torch.rand(len(probs), 1, generator=generator, device=probs.device, dtype=probs.dtype)
    return run_compiled(_inverse_cdf, probs, u) if compiled else _inverse_cdf(probs, u)


def _inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """[B] the action at which each row's running sum reaches ``1 - uniform`` [B, 1] of its
    total."""
    cdf = probs.cumsum(1)  # [B, A], non-decreasing
    return (cdf < (1 - uniform) * cdf[:, -1:]).sum(1)


@dataclass
class TraversalContext:
    """Everything one player's traversal epoch works with, handed to a :class:`Sampler`.

    The networks are the inference queue's: ``advantage_p0`` and ``advantage_p1`` give
    each player's current strategy (:data:`ADVANTAGE_NETWORKS`), ``strategy`` the average
    strategy, and a sampler that learns a value baseline finds its network under the name
    it declares. Rows go to the buffers through :meth:`add_advantage_rows` and
    :meth:`add_strategy_rows`, which count them and time the writes in :attr:`stats`.

    Args:
        game: the game played (a :class:`Game`; Lost Cities rules or a preset name are
            taken as :class:`~lostcities_cfr.game.lost_cities.LostCities`).
        traverser: the player whose regrets this epoch samples (0 or 1).
        iteration: the CFR iteration (1-based); every row is tagged with it.
        queue: the inference queue, with the networks above registered.
        advantage_buffer: the traverser's advantage reservoir.
        strategy_buffer: the average-strategy reservoir (the opponent's strategies).
        generator: draws the deals and every sampled action; its device is the walkers'.
        value_buffer: the history value network's buffer, for samplers that train one.
        kernels: how the dealt games run the rules (``GameBatch``'s ``kernels``):
            ``"eager"`` torch calls or ``"compiled"`` kernels.
    """

    game: Game | Rules | str
    traverser: int
    iteration: int
    queue: InferenceQueue
    advantage_buffer: ReservoirBuffer
    strategy_buffer: ReservoirBuffer
    generator: torch.Generator
    value_buffer: ReservoirBuffer | None = None
    kernels: str = "eager"
    stats: TraversalStats = field(default_factory=TraversalStats)

    def __post_init__(self) -> None:
        self.game = as_game(self.game)
        if self.traverser not in (0, 1):
            raise ValueError(f"traverser={self.traverser}; it must be 0 or 1")

    @property
    def device(self) -> torch.device:
        """Where the walkers live: the generator's device."""
        return self.generator.device

    def read_counts(self, counts: torch.Tensor) -> list[int]:
        """The integers ``counts`` [k] on the host, counted in ``stats.host_reads``.

        A host read waits for the device to finish everything queued before it; a sampler
        that reads all it needs of a step at once (how many rows each of its masks holds)
        waits once per step, and sizes its tensors from the counts without waiting again
        (:func:`static_rows`)."""
        self.stats.host_reads += 1
        return counts.tolist()

    def add_advantage_rows(
        self, features: torch.Tensor, legal: torch.Tensor, regrets: torch.Tensor
    ) -> None:
        """Sampled regrets [n, A] of the traverser at rows features [n, F], legal [n, A]."""
        self._add(self.advantage_buffer, features, legal, regrets)
        self.stats.advantage_rows += len(features)

    def add_strategy_rows(
        self, features: torch.Tensor, legal: torch.Tensor, strategies: torch.Tensor
    ) -> None:
        """The opponent's current strategies [n, A] at rows features [n, F], legal [n, A]."""
        self._add(self.strategy_buffer, features, legal, strategies)
        self.stats.strategy_rows += len(features)

    def add_value_rows(self, history: torch.Tensor, values: torch.Tensor) -> None:
        """Value targets [n] (each state's return for its player to move) of history rows
        [n, H], for the history value network (one output, so its mask is all true)."""
        targets = values[:, None]  # [n, 1]
        self._add(self.value_buffer, history, torch.ones_like(targets, dtype=torch.bool), targets)
        self.stats.value_rows += len(history)

    def _add(
        self,
        buffer: ReservoirBuffer,
        features: torch.Tensor,
        legal: torch.Tensor,
        targets: torch.Tensor,
    ) -> None:
        start = time.perf_counter()
        buffer.add(features, legal, targets, self.iteration)
        self.stats.memory_add_seconds += time.perf_counter() - start


class Sampler:
    """Base class of the traversal samplers: subclasses implement :meth:`walk`.

    :meth:`traverse` deals ``n_traversals`` games, ``walkers`` at a time, hands each
    batch to :meth:`walk` (through :meth:`traverse_games`, which counts the traversals)
    with the epoch's :class:`TraversalContext`, and times the whole epoch. A new sampler is one subclass and one config line
    (``model.sampler.class_path``).

    Args:
        walkers: traversals run concurrently (games dealt per batch). Larger
            batches make larger network forwards; the frontier of a batch can
            hold many more rows than this (forked children, playouts).
        utility_scale: utilities (score differences) are divided by it.
    """

    @checked
    def __init__(self, walkers: PositiveInt = 1024, utility_scale: PositiveFloat = 1.0) -> None:
        self.walkers = walkers
        self.utility_scale = utility_scale

    def traverse(self, context: TraversalContext, n_traversals: int) -> TraversalStats:
        """Run ``n_traversals`` traversals from fresh deals; the epoch's stats.

        Rows go to ``context``'s buffers, tagged with its iteration; its generator
        draws the deals and every sampled action.
        """
        start = time.perf_counter()
        dealt = 0
        while dealt < n_traversals:
            size = min(self.walkers, n_traversals - dealt)
            generator = context.generator
            seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
            games = context.game.new_batch(
                size, seed=seed, device=generator.device, kernels=context.kernels
            )
            self.traverse_games(games, context)
            dealt += size
        context.stats.seconds += time.perf_counter() - start
        return context.stats

    def traverse_games(self, games: BatchedGames, context: TraversalContext) -> None:
        """One traversal from each game of ``games`` (any states, left unchanged)."""
        context.stats.traversals += games.batch_size
        self.walk(games, context)

    def walk(self, games: BatchedGames, context: TraversalContext) -> None:
        """The sampler's algorithm: one traversal from each game of ``games``.

        Subclasses implement it and leave ``games`` unchanged (step a clone); rows go
        through ``context.add_advantage_rows`` / ``add_strategy_rows``, and the decision
        nodes visited are added to ``context.stats.nodes``.
        """
        raise NotImplementedError

    def utility(
        self, games: BatchedGames, traverser: int, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The traverser's return divided by ``utility_scale``: [B] float32 for every game,
        or [n] for the games at ``rows`` only (scoring a few ended games of a large
        batch costs less than scoring all of them)."""
        if rows is not None:
            games = games.select(rows)
        return games.returns()[:, traverser] / self.utility_scale
