"""Callbacks and a sampler that the training tests add to runs (importable by class path).

Subprocess runs find this module through ``PYTHONPATH``; in-process runs through the test
folder that pytest puts on ``sys.path``. :class:`RecordingExternalSampling` is the one place
where the training tests meet a sampler's own interface (``traverse_games``).
"""

from __future__ import annotations

import copy
import os
import signal
import time
from pathlib import Path

import pytorch_lightning as pl
import torch

from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.game import GameBatch


class RecordingExternalSampling(ExternalSampling):
    """External sampling that keeps a copy of every batch of deals it walks, with the
    traverser: ``walked`` holds ``(traverser, games)`` in the order walked."""

    def __init__(self, walkers: int = 1024, utility_scale: float = 1.0) -> None:
        super().__init__(walkers, utility_scale)
        self.walked: list[tuple[int, GameBatch]] = []

    def traverse_games(self, games, context):
        self.walked.append((context.traverser, games.clone()))
        return super().traverse_games(games, context)

    def dealt(self, traverser: int) -> int:
        """Games walked so far with ``traverser`` as the traverser."""
        return sum(games.batch_size for p, games in self.walked if p == traverser)


class StallAtIteration(pl.Callback):
    """At the start of ``iteration``'s traversal (or after its first update, ``during=
    "updates"``), touch ``marker`` and sleep: a run to kill in the middle of that iteration,
    after the checkpoint of the one before."""

    def __init__(
        self, iteration: int, marker: str, seconds: float = 300.0, during: str = "traversal"
    ) -> None:
        self.iteration = iteration
        self.marker = marker
        self.seconds = seconds
        self.during = during

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.during == "traversal":
            self._stall(pl_module.iteration)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.during == "updates" and batch_idx == 0:
            self._stall(pl_module.iteration)

    def _stall(self, iteration: int) -> None:
        if iteration == self.iteration:
            Path(self.marker).touch()
            time.sleep(self.seconds)


class SwallowCtrlCAt(pl.Callback):
    """At the start of ``iteration``'s traversal, send this process SIGINT and swallow the
    KeyboardInterrupt, as a finaliser that it interrupts does: a Ctrl-C the run would
    otherwise go on after."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if pl_module.iteration == self.iteration:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5.0)  # the interrupt arrives here
            except KeyboardInterrupt:
                pass


class KillRankAt(pl.Callback):
    """At the start of ``iteration``'s traversal, rank ``rank`` kills itself with SIGKILL: a
    DDP rank lost mid-run (out of memory, a node gone), after the checkpoint before."""

    def __init__(self, rank: int, iteration: int) -> None:
        self.rank = rank
        self.iteration = iteration

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_rank == self.rank and pl_module.iteration == self.iteration:
            os.kill(os.getpid(), signal.SIGKILL)


class BufferProbe(pl.Callback):
    """Keeps the reservoirs' states as the first iteration of a fit starts (after a resume's
    restore, before any traversal); with ``folder``, each rank also saves them to
    ``<folder>/buffers_rank<r>.pt``."""

    def __init__(self, folder: str | None = None) -> None:
        self.states: dict | None = None
        self.iteration: int | None = None
        self.folder = folder

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.states is None:
            self.iteration = pl_module.iteration
            # Copies: a full buffer's state shares its storage, which training goes on filling.
            self.states = copy.deepcopy(
                {
                    "advantage_buffers": [b.state_dict() for b in pl_module.advantage_buffers],
                    "strategy_buffer": pl_module.strategy_buffer.state_dict(),
                }
            )
            if self.folder is not None:
                path = Path(self.folder) / f"buffers_rank{trainer.global_rank}.pt"
                torch.save(self.states, path)


class RankStateProbe(pl.Callback):
    """At the end of a fit, saves this rank's networks, reservoir contents and the games its
    :class:`RecordingExternalSampling` walked per player to ``<folder>/rank<r>.pt``, so that
    a test can compare the ranks of a DDP run."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        state = {
            "weights": pl_module.state_dict(),
            "dealt": [pl_module.sampler.dealt(p) for p in (0, 1)]
            if isinstance(pl_module.sampler, RecordingExternalSampling)
            else None,
            "strategy_features": pl_module.strategy_buffer.features[
                : len(pl_module.strategy_buffer)
            ],
        }
        torch.save(state, Path(self.folder) / f"rank{trainer.global_rank}.pt")


class PoisonStrategyNetwork(pl.Callback):
    """After ``iteration``'s traversal, fills the strategy network's weights with NaN: a
    network gone bad (a flipped bit, a diverged update) just before it trains."""

    def __init__(self, iteration: int = 2) -> None:
        self.iteration = iteration

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if pl_module.iteration == self.iteration:
            for parameter in pl_module.strategy_net.parameters():
                parameter.data.fill_(float("nan"))


NETWORKS = ("advantage_p0", "advantage_p1", "strategy")


class IterationProbe(pl.Callback):
    """What each iteration of an in-process fit did, in ``iterations`` (one dict each):

    ``before``/``after``: every network's weights (:data:`NETWORKS` order) before the
    iteration's first update and at its end; ``rows``: the rows of each training forward, by
    network; ``grad_norms``: each update's gradient norm as the optimizer sees it, by network;
    ``metrics``: the module's ``iteration_metrics``; ``held``/``seen``: rows each reservoir
    holds and has been offered, after the traversal.
    """

    def __init__(self) -> None:
        self.iterations: list[dict] = []

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.nets = [*pl_module.advantage_nets, pl_module.strategy_net]
        for name, net in zip(NETWORKS, self.nets, strict=True):
            net.register_forward_hook(self._count_rows(name))

    def _count_rows(self, name: str):
        def hook(module, args, output):
            if torch.is_grad_enabled():  # training; traversal and agents run without grad
                self.current["rows"][name].append(len(args[0]))

        return hook

    def _weights(self) -> list[list[torch.Tensor]]:
        return [[p.detach().clone() for p in net.parameters()] for net in self.nets]

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.current = {
            "rows": {name: [] for name in NETWORKS},
            "grad_norms": {name: [] for name in NETWORKS},
        }

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        buffers = [*pl_module.advantage_buffers, pl_module.strategy_buffer]
        self.current["held"] = [len(buffer) for buffer in buffers]
        self.current["seen"] = [buffer.n_seen for buffer in buffers]

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if batch_idx == 0:
            self.current["before"] = self._weights()

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        first = optimizer.param_groups[0]["params"][0]
        index = next(i for i, net in enumerate(self.nets) if next(net.parameters()) is first)
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        self.current["grad_norms"][NETWORKS[index]].append(float(norm))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.current["after"] = self._weights()
        self.current["metrics"] = dict(pl_module.iteration_metrics)
        self.iterations.append(self.current)


def largest_change(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    """The largest absolute change of any weight between two snapshots of one network."""
    return max(float((a - b).abs().max()) for a, b in zip(before, after, strict=True))
