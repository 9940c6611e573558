"""The training epoch's updates: which network each step updates, and their bookkeeping.

A Deep CFR iteration trains several networks on their own reservoirs (the advantage network
of each player, the strategy network and, with a value-baseline sampler, the history value
network). The epoch runs them one network after another, one update per Lightning step
(:class:`UpdateSchedule`): each network's updates see the same shapes back to back, and a
network's time is the span of its steps, measured with one wait for the device at its end
rather than one per update.

Nothing in an update reads a value back from the device: each loss is added to a sum on the
device, which :class:`UpdateLog` reads once, when the iteration's updates are over; that read
also finds the first update whose loss was not finite, so that a diverging run stops before
its checkpoint as it did when every update read its loss.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import torch

from lostcities_cfr.errors import NonFiniteError
from lostcities_cfr.training import metrics


class UpdateSchedule:
    """The networks each step of a training epoch updates (none: a step that does nothing).

    Args:
        phases: per phase, ``(network, updates)`` in the order they run; the epoch runs the
            phases one after another (alternating updates: player 0's half, then player 1's).
        lengths: the steps each phase takes; at least its steps' count. Lightning fixes an
            epoch's steps for the whole run, so a phase whose network skips an iteration
            (the strategy network, ``strategy_every``) keeps its steps as no-ops.
        interleave: each step updates every network of the phase that has updates left,
            one round of them a step, instead of one network after another. The networks
            are independent, so this trains the same; a DDP run then syncs one step's
            networks in one all-reduce (:func:`~lostcities_cfr.training.distributed.
            average_gradients`), ``max(updates)`` collectives a phase instead of their sum.
    """

    def __init__(
        self,
        phases: Sequence[Sequence[tuple[str, int]]],
        lengths: Sequence[int],
        interleave: bool = False,
    ) -> None:
        self.phase_starts: list[int] = []
        self.steps: list[tuple[str, ...]] = []
        # Per step and network: (k, n), its k-th (0-based) of n updates in the phase.
        self.positions: list[tuple[tuple[int, int], ...]] = []
        for phase, length in zip(phases, lengths, strict=True):
            self.phase_starts.append(len(self.steps))
            if interleave:
                rounds = range(max((updates for _, updates in phase), default=0))
                steps = [tuple(name for name, n in phase if k < n) for k in rounds]
                positions = [tuple((k, n) for _, n in phase if k < n) for k in rounds]
            else:
                steps = [(name,) for name, updates in phase for _ in range(updates)]
                positions = [((k, n),) for _, n in phase for k in range(n)]
            if len(steps) > length:
                raise ValueError(f"phase of {len(steps)} steps in {length}")
            self.steps += steps + [()] * (length - len(steps))
            self.positions += positions + [()] * (length - len(steps))

    def __len__(self) -> int:
        return len(self.steps)

    def networks(self, step: int) -> tuple[str, ...]:
        """The networks step ``step`` updates (none: a no-op step)."""
        return self.steps[step]

    def position(self, step: int) -> tuple[tuple[int, int], ...]:
        """For each network of step ``step``, ``(k, n)``: the step is its ``k``-th (0-based)
        of ``n`` updates in its phase."""
        return self.positions[step]


class UpdateLog:
    """An iteration's losses, summed on the device, and each network's training seconds.

    Args:
        device: where the losses are summed.
        kinds: the phase each network's seconds count in (``time/<kind>_train_s``).
    """

    def __init__(self, device: torch.device, kinds: Mapping[str, str]) -> None:
        self.device = device
        self.kinds = kinds
        # Per network, on the device: [loss sum, updates, first update (1-based) whose loss
        # was not finite (0: none), that loss].
        self._state: dict[str, torch.Tensor] = {}
        self.seconds = dict.fromkeys(kinds.values(), 0.0)
        self._running: tuple[str, ...] = ()
        self._since = 0.0

    def start(self, names: tuple[str, ...]) -> None:
        """Step about to update ``names`` (none: a no-op step): other networks than the
        last step's close that step's span."""
        if names != self._running:
            self.stop()
            self._running, self._since = names, time.perf_counter()

    def stop(self) -> None:
        """Close the running span: wait for the device, then add its seconds, split evenly
        over its networks (one each, unless the updates are interleaved)."""
        if self._running:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            share = (time.perf_counter() - self._since) / len(self._running)
            for name in self._running:
                self.seconds[self.kinds[name]] += share
        self._running = ()

    def record(self, name: str, loss: torch.Tensor) -> None:
        """Add an update's loss (a 0-d tensor) without reading it."""
        loss = loss.detach().float()
        if name not in self._state:
            self._state[name] = torch.zeros(4, device=self.device)
        total, updates, first_bad, bad_loss = self._state[name].unbind()  # views
        total.add_(loss)
        updates.add_(1)
        bad = ~torch.isfinite(loss) & (first_bad == 0)  # the first one only
        first_bad.copy_(torch.where(bad, updates, first_bad))
        bad_loss.copy_(torch.where(bad, loss, bad_loss))

    def read(self, iteration: int) -> dict[str, float]:
        """Each network's mean loss (``loss/<network>``), read in one transfer.

        Raises:
            NonFiniteError: an update's loss was not finite: names the network, the first
                such update and its loss.
        """
        self.stop()
        names = list(self._state)
        if not names:
            return {}
        read = torch.stack([self._state[n] for n in names]).tolist()  # [networks, 4]
        for name, (_, _, update, loss) in zip(names, read, strict=True):
            if update:
                raise NonFiniteError(
                    f"{metrics.loss(name)}={loss} at iteration {iteration}, update "
                    f"{int(update)}: training stopped before this iteration's checkpoint "
                    f"({_kept(iteration)})"
                )
        return {
            metrics.loss(name): total / updates
            for name, (total, updates, _, _) in zip(names, read, strict=True)
        }

    def phase_seconds(self) -> dict[str, float]:
        """``time/<kind>_train_s``: the seconds of each kind of network's updates."""
        return {metrics.phase_seconds(f"{kind}_train"): s for kind, s in self.seconds.items()}


def _kept(iteration: int) -> str:
    before = iteration - 1
    if before:
        return f"the last checkpoint, iteration {before}'s, is kept"
    return "no iteration has ended, so there is no checkpoint"
