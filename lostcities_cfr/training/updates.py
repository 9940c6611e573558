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
    """The network each step of a training epoch updates (None: a step that does nothing).

    Args:
        phases: per phase, ``(network, updates)`` in the order they run; the epoch runs the
            phases one after another (alternating updates: player 0's half, then player 1's).
        lengths: the steps each phase takes; at least the sum of its updates. Lightning
            fixes an epoch's steps for the whole run, so a phase whose network skips an
            iteration (the strategy network, ``strategy_every``) keeps its steps as no-ops.
    """

    def __init__(self, phases: Sequence[Sequence[tuple[str, int]]], lengths: Sequence[int]) -> None:
        self.phase_starts: list[int] = []
        self.steps: list[str | None] = []
        # Per step: (k, n), its network's k-th (0-based) of n updates in the phase.
        self.positions: list[tuple[int, int]] = []
        for phase, length in zip(phases, lengths, strict=True):
            self.phase_starts.append(len(self.steps))
            names = [name for name, updates in phase for _ in range(updates)]
            if len(names) > length:
                raise ValueError(f"phase of {len(names)} updates in {length} steps")
            self.steps += names + [None] * (length - len(names))
            self.positions += [(k, updates) for _, updates in phase for k in range(updates)]
            self.positions += [(0, 0)] * (length - len(names))

    def __len__(self) -> int:
        return len(self.steps)

    def network(self, step: int) -> str | None:
        """The network step ``step`` updates (None: none)."""
        return self.steps[step]

    def position(self, step: int) -> tuple[int, int]:
        """``(k, n)``: step ``step`` is the ``k``-th (0-based) of its network's ``n`` updates
        in its phase (``(0, 0)`` for a no-op step)."""
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
        self._running: str | None = None
        self._since = 0.0

    def start(self, name: str | None) -> None:
        """Step about to update ``name`` (None: a no-op step): a new network's first update
        closes the previous network's span."""
        if name != self._running:
            self.stop()
            self._running, self._since = name, time.perf_counter()

    def stop(self) -> None:
        """Close the running network's span: wait for the device, then add its seconds."""
        if self._running is not None:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.seconds[self.kinds[self._running]] += time.perf_counter() - self._since
        self._running = None

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
