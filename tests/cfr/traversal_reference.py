"""Helpers of the sampler tests: stub strategies, a counting queue, and a plain recursive
reference that computes exact regrets on the reference engine (``GameState``)."""

from __future__ import annotations

import torch
from torch import nn

from lostcities_cfr.cfr import ReservoirBuffer
from lostcities_cfr.cfr.traversal import ADVANTAGE_NETWORKS, TraversalContext
from lostcities_cfr.game import GameBatch, GameState, Rules, feature_size
from lostcities_cfr.inference import InferenceQueue

TINY = Rules.tiny()
F, A = feature_size(TINY), TINY.n_actions


def argmax_head(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """A deterministic strategy: all probability on the legal action with the top output."""
    best = outputs.masked_fill(~legal, float("-inf")).argmax(1, keepdim=True)
    return torch.zeros_like(outputs).scatter_(1, best, 1.0) * legal.any(1, keepdim=True)


def linear_net(seed: int, rules: Rules = TINY) -> nn.Module:
    """A fixed random linear map: regret matching over it gives mixed, state-dependent strategies."""
    torch.manual_seed(seed)
    return nn.Linear(feature_size(rules), rules.n_actions)


class CountingQueue(InferenceQueue):
    """An unpadded queue that records the network names submitted before each flush."""

    def __init__(self) -> None:
        super().__init__(bucket_sizes=None)
        self.flushes: list[list[str]] = []
        self._submitted: list[str] = []

    def submit(self, name, features, legal):
        self._submitted.append(name)
        return super().submit(name, features, legal)

    def flush(self) -> None:
        if self._submitted:
            self.flushes.append(self._submitted)
            self._submitted = []
        super().flush()


def make_queue(heads: tuple, seeds: tuple[int, int] = (1, 2), rules: Rules = TINY) -> CountingQueue:
    """A queue with ``advantage_p`` = ``heads[p]`` over ``linear_net(seeds[p])``."""
    queue = CountingQueue()
    for p in range(2):
        queue.register(ADVANTAGE_NETWORKS[p], linear_net(seeds[p], rules), heads[p])
    return queue


def buffers(capacity: int = 200_000, rules: Rules = TINY) -> tuple[ReservoirBuffer, ...]:
    """Advantage and strategy buffers that keep every row, targets in float32."""
    return tuple(
        ReservoirBuffer(
            capacity, feature_size(rules), rules.n_actions, target_dtype=torch.float32, seed=s
        )
        for s in range(2)
    )


def context(
    queue: InferenceQueue,
    advantage: ReservoirBuffer,
    strategy: ReservoirBuffer,
    traverser: int = 0,
    iteration: int = 1,
    seed: int = 0,
    rules: Rules = TINY,
) -> TraversalContext:
    """The traversal context of one epoch over these buffers; ``seed`` seeds its generator."""
    return TraversalContext(
        game=rules,
        traverser=traverser,
        iteration=iteration,
        queue=queue,
        advantage_buffer=advantage,
        strategy_buffer=strategy,
        generator=torch.Generator().manual_seed(seed),
    )


def held(buffer: ReservoirBuffer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(features float32, legal, targets) of the rows a buffer holds."""
    n = len(buffer)
    return buffer.features[:n].float(), buffer.legal[:n], buffer.targets[:n].float()


def tensor_rows(states: list[GameState], rules: Rules = TINY) -> tuple[torch.Tensor, torch.Tensor]:
    """Features [n, F] (of the player to move) and legal masks [n, A] of reference states."""
    features = torch.tensor(
        [s.information_state(s.current_player) for s in states], dtype=torch.float32
    )
    legal = torch.zeros(len(states), rules.n_actions, dtype=torch.bool)
    for i, s in enumerate(states):
        legal[i, s.legal_actions()] = True
    return features, legal


def strategy(queue: InferenceQueue, state: GameState) -> torch.Tensor:
    """The queue's current strategy [A] for the player to move in ``state``."""
    features, legal = tensor_rows([state], state.rules)
    return queue(ADVANTAGE_NETWORKS[state.current_player], features, legal)[0].double()


class ExactTree:
    """Exact expected values under the queue's strategies, by recursion on ``GameState``.

    The traverser branches on every legal action (as external sampling does); the
    opponent's actions are weighted by its strategy (actions of probability 0 are skipped,
    so with a deterministic opponent the walk is exactly the tree external sampling
    visits). Every visited node is recorded: the traverser's as (features, legal,
    regrets), the opponent's as (features, legal, strategy).
    """

    def __init__(self, queue: InferenceQueue, traverser: int, utility_scale: float = 1.0):
        self.queue = queue
        self.traverser = traverser
        self.utility_scale = utility_scale
        self.traverser_rows: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.opponent_rows: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def value(self, state: GameState) -> float:
        if state.is_terminal:
            return state.returns()[self.traverser] / self.utility_scale
        features, legal = tensor_rows([state], state.rules)
        sigma = strategy(self.queue, state)
        children = {}
        for a in state.legal_actions():
            if state.current_player == self.traverser or sigma[a] > 0:
                child = state.clone()
                child.apply(a)
                children[a] = self.value(child)
        v = sum(float(sigma[a]) * value for a, value in children.items())
        if state.current_player == self.traverser:
            regrets = torch.zeros(state.rules.n_actions, dtype=torch.float64)
            for a, value in children.items():
                regrets[a] = value - v
            self.traverser_rows.append((features[0], legal[0], regrets))
        else:
            self.opponent_rows.append((features[0], legal[0], sigma.float()))
        return v

    def regrets(self, state: GameState) -> torch.Tensor:
        """The exact regrets [A] float64 at ``state``, a traverser node."""
        self.value(state)
        return self.traverser_rows[-1][2]


def advance(rules: Rules, seed: int, decisions: int) -> GameState:
    """A fresh deal after ``decisions`` random legal actions."""
    generator = torch.Generator().manual_seed(seed)
    state = GameState.new(rules, seed=seed)
    for _ in range(decisions):
        legal = state.legal_actions()
        state.apply(legal[int(torch.randint(len(legal), (1,), generator=generator))])
    return state


def repeated(state: GameState, n: int) -> GameBatch:
    """``n`` copies of one state as a batch."""
    return GameBatch.from_states([state]).select([0] * n)


def rows_at(
    buffer: ReservoirBuffer, state: GameState
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows a buffer holds whose features are those of ``state`` (to move)."""
    features, legal, targets = held(buffer)
    key = tensor_rows([state], state.rules)[0].half().float()
    match = (features == key).all(1)
    return features[match], legal[match], targets[match]


def assert_unbiased(samples: torch.Tensor, expected: torch.Tensor, z: float = 4.5) -> None:
    """Each column's sample mean lies within ``z`` standard errors (plus rounding) of
    ``expected``; ``samples`` [n, A]."""
    samples = samples.double()
    n = len(samples)
    assert n > 100
    error = (samples.mean(0) - expected).abs()
    tolerance = z * samples.std(0) / n**0.5 + 1e-3
    assert bool((error <= tolerance).all()), (error, tolerance, expected)


def assert_same_rows(actual: tuple, expected: list, atol: float = 1e-4) -> None:
    """The buffer rows ``actual`` are the rows ``expected`` [(features, legal, target)] in
    some order; features compare as the buffer stores them (float16)."""

    def key(features, legal):
        return tuple(features.half().tolist()), tuple(legal.tolist())

    pending: dict = {}
    for features, legal, target in expected:
        pending.setdefault(key(features, legal), []).append(target.float())
    features, legal, targets = actual
    assert len(features) == len(expected)
    for f, m, t in zip(features, legal, targets, strict=True):
        candidates = pending.get(key(f, m), [])
        match = next((i for i, c in enumerate(candidates) if torch.allclose(c, t, atol=atol)), None)
        assert match is not None, f"row with targets {t.tolist()} has no exact counterpart"
        candidates.pop(match)
