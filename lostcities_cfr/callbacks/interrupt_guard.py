"""Ctrl-C stops a run even when the KeyboardInterrupt it raised was swallowed."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import pytorch_lightning as pl

from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.training.module import DeepCFR


class InterruptGuard(TraversalCallback):
    """Raises a Ctrl-C again at the end of the traversal or the next training step if the
    run went on after it.

    Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be. Raised
    inside a finaliser (an object's ``__del__``, a weakref callback, run by the garbage
    collector at any moment) it is printed as "Exception ignored" and dropped, and the run
    goes on as if the user had not asked it to stop: ``scripts/tools/reliability.py`` saw one run in
    thirteen keep training for minutes after its Ctrl-C. This guard's handler remembers each
    SIGINT before raising it as usual; a training step that starts with one remembered raises
    it again, as does the end of a traversal epoch, so Lightning's graceful shutdown (and
    ``RunCheckpoint``'s ``final.ckpt``) follows at most one traversal epoch late. The fit
    command adds it to every run.
    """

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True
        signal.default_int_handler(signum, frame)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if threading.current_thread() is threading.main_thread():  # only it may set handlers
            self._previous = signal.signal(signal.SIGINT, self._handle)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._previous is not None and signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._previous)
        self._previous = None

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self._raise_pending()

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._raise_pending()

    def _raise_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt("a Ctrl-C the run went on after")
