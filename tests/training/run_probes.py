"""Callbacks that the checkpoint tests add to runs through the CLI (importable by class path).

Subprocess runs find this module through ``PYTHONPATH``; in-process runs through the test
folder that pytest puts on ``sys.path``.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytorch_lightning as pl


class StallAtIteration(pl.Callback):
    """At the start of ``iteration``'s traversal, touch ``marker`` and sleep: a run to kill
    in the middle of that iteration, after the checkpoint of the one before."""

    def __init__(self, iteration: int, marker: str, seconds: float = 300.0) -> None:
        self.iteration = iteration
        self.marker = marker
        self.seconds = seconds

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if pl_module.iteration == self.iteration:
            Path(self.marker).touch()
            time.sleep(self.seconds)


class BufferProbe(pl.Callback):
    """Keeps the reservoirs' states as the first iteration of a fit starts (after a resume's
    restore, before any traversal)."""

    def __init__(self) -> None:
        self.states: dict | None = None
        self.iteration: int | None = None

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


class RankStateProbe(pl.Callback):
    """At the end of a fit, saves this rank's networks and reservoir contents to
    ``<folder>/rank<r>.pt``, so that a test can compare the ranks of a DDP run."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        import torch

        state = {
            "weights": pl_module.state_dict(),
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
