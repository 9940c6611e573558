"""Valuing states for search: rollouts of a base policy, cut short by a value network.

A search values an action in a world by the state it leads to (a *child*). This module
plays a batch of children on: every child advances by the base policy's moves (both
players') in lockstep, one ``act`` call per step over all rows, until the round ends or
``depth`` decisions have been made; then a finished round is worth its score difference and
an unfinished one its value network's estimate. ``depth=None`` plays every round out
(Tesauro and Galperin's rollouts, "On-line policy improvement using Monte-Carlo search",
NIPS 1996); ``depth=0`` values each child at once.

A :class:`StateValue` is what a checkpoint offers to cut rollouts short: PPO's value network
over the information state of the player to move, or an ESCHER checkpoint's history value
network over the whole state (a sampled world is one), each with the points one output unit
is worth. Its forwards go through the inference queue, one per cut.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lostcities_cfr.agents.base import Agent, AgentRandomness
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.encoding import encode_history
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.search.streams import child, unit

VALUE = "value"  # the value network's name in the search's inference queue
# Drop finished rollouts from the lockstep batch once this share of its rows is done (as
# the arena does: copying the live rows costs less than stepping dead ones for long).
_COMPACT_SHARE = 0.25


@dataclass(frozen=True)
class StateValue:
    """A network estimating the return of the player to move.

    Args:
        network: features ``[n, F]`` -> ``[n, 1]``.
        history: its features are the whole state's (``encode_history``: an ESCHER
            checkpoint's V(h)) rather than the player's information state (``encode``: PPO).
        scale: points of score difference per output unit (the training run's
            ``utility_scale`` or ``reward_scale``).
    """

    network: nn.Module
    history: bool
    scale: float

    def features(self, batch: GameBatch) -> torch.Tensor:
        """[n, F] the network's inputs for every game of ``batch``."""
        return encode_history(batch) if self.history else batch.encode()


class Rollouts:
    """Values children for the player who chose them, by the base policy and a value network.

    Args:
        policy: the base agent, playing both players.
        value: cuts rollouts after ``depth`` decisions; None plays them out.
        depth: decisions played before the value network takes over; None: to the end.
        chunk: rows played in one lockstep batch (more are played chunk after chunk; the
            engine and small networks run fastest on batches that stay in cache).
        wins: a finished round is worth +1 won, 0 drawn, -1 lost (the mean is the chance of
            winning minus that of losing) instead of its score difference; full rollouts only.
        seed: seeds the sampling of a base that offers its probabilities (``_act``); other
            bases draw from their own seed.
    """

    def __init__(
        self,
        policy: Agent,
        value: StateValue | None = None,
        depth: int | None = None,
        chunk: int = 1024,
        wins: bool = False,
        seed: int | None = None,
    ) -> None:
        if depth is not None and value is None:
            raise ValueError(f"depth={depth} needs a value network to value the cut states")
        if depth is not None and wins:
            raise ValueError(
                f"depth={depth}: valuing wins needs full rollouts (a value network "
                "estimates points, not the chance of winning)"
            )
        self.policy = policy
        self.value = value
        self.depth = depth
        self.chunk = chunk
        self.wins = wins
        self.queue = InferenceQueue()
        if value is not None:
            self.queue.register(VALUE, value.network)
        self.decisions = 0  # decisions played in rollouts, for cost reports
        self._rng = AgentRandomness(seed)

    def values(
        self, children: GameBatch, chooser: torch.Tensor, streams: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[n] float32: each child's value in points for ``chooser`` ([n] 0/1: the player
        who chose the action leading to it).

        ``streams`` ([n] int64, :mod:`~lostcities_cfr.search.streams`): a base that offers
        its probabilities samples each row's moves from the row's own stream, so a row's
        value does not depend on the rows played beside it; None: the rollouts' generator.
        """
        n = children.batch_size
        out = torch.empty(n, device=children.device)
        for start in range(0, n, self.chunk):
            rows = torch.arange(start, min(start + self.chunk, n), device=children.device)
            part = children if len(rows) == n else children.select(rows)
            part_streams = None if streams is None else streams[rows]
            out[rows] = self._play(part, chooser[rows], part_streams)
        return out

    def _play(
        self, batch: GameBatch, chooser: torch.Tensor, streams: torch.Tensor | None
    ) -> torch.Tensor:
        """Values of one chunk (module docstring); ``batch`` is played in place."""
        values = torch.zeros(batch.batch_size, device=batch.device)
        rows = torch.arange(batch.batch_size, device=batch.device)  # each live row's index
        steps = 0
        while True:
            done = batch.done
            n_done = int(done.sum())
            cut = self.depth is not None and steps >= self.depth
            if n_done == batch.batch_size or cut or n_done >= _COMPACT_SHARE * batch.batch_size:
                if n_done:
                    ended = done.nonzero().squeeze(1)
                    values[rows[ended]] = self._final(batch.select(ended), chooser[rows[ended]])
                if n_done == batch.batch_size:
                    return values
                if cut:
                    live = (~done).nonzero().squeeze(1)
                    values[rows[live]] = self._estimate(batch.select(live), chooser[rows[live]])
                    return values
                keep = (~done).nonzero().squeeze(1)
                rows = rows[keep]
                batch = batch.select(keep)
            self.decisions += int((~batch.done).sum())
            step_keys = None if streams is None else child(streams[rows], steps)
            batch.step(self._act(batch, step_keys), check=False)
            steps += 1

    def _act(self, batch: GameBatch, keys: torch.Tensor | None = None) -> torch.Tensor:
        """The base policy's actions [B]. A base that offers its probabilities
        (``policy(batch)``, as network agents do) is sampled by inverse transform, one uniform
        per game from the rollouts' own generator, or from ``keys`` ([B] int64, one per game:
        :func:`~lostcities_cfr.search.streams.unit`): ``torch.multinomial`` draws an
        exponential per action, which took a quarter of a rollout's time. Greedy bases play
        their argmax."""
        policy = getattr(self.policy, "policy", None)
        if policy is None:
            return self.policy.act(batch)
        probs = policy(batch)  # [B, A], 0 at illegal actions and in finished games
        if getattr(self.policy, "greedy", False):
            return probs.argmax(1)
        cumulative = probs.cumsum(1)  # [B, A]
        if keys is None:
            u = self._rng.uniform((batch.batch_size, 1), batch.device)
        else:
            u = unit(keys)[:, None]
        u = u * cumulative[:, -1:]
        drawn = (cumulative <= u).sum(1)  # the first action whose cumulative exceeds u
        # u rounded up to the total would pass every action: take the last possible one
        last = probs.shape[1] - 1 - (probs.flip(1) > 0).int().argmax(1)
        return torch.minimum(drawn, last)

    def _final(self, batch: GameBatch, chooser: torch.Tensor) -> torch.Tensor:
        """[n] the score difference (or its sign) of finished rounds for ``chooser``."""
        difference = batch.returns().gather(1, chooser[:, None]).squeeze(1)
        return difference.sign() if self.wins else difference

    def _estimate(self, batch: GameBatch, chooser: torch.Tensor) -> torch.Tensor:
        """[n] the value network's estimate for ``chooser`` of unfinished rounds."""
        legal = torch.ones(batch.batch_size, 1, dtype=torch.bool, device=batch.device)
        value = self.queue(VALUE, self.value.features(batch), legal)[:, 0].float()
        side = torch.where(batch.current_player == chooser, 1.0, -1.0)
        return side * value * self.value.scale
