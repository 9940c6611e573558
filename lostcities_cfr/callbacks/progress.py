"""One progress display per run: the CFR iteration, its traversal epoch and its training steps."""

from __future__ import annotations

import sys
import threading
import time

import pytorch_lightning as pl
from pytorch_lightning.callbacks import TQDMProgressBar

from lostcities_cfr.arguments import NonNegativeInt, PositiveFloat, checked
from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.training.module import DeepCFR


def _si(value: float) -> str:
    """``45200 -> '45.2k'``: short enough for a progress bar."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


class IterationProgressBar(TQDMProgressBar, TraversalCallback):
    """Lightning's tqdm bar, titled by CFR iteration, with the traversal epoch shown.

    Acts every iteration: at its start the one bar of the run is reset to the
    iteration's training steps and titled ``iteration t/T``; during the
    traversal epoch (``on_traversal_start`` to ``on_traversal_end``) its
    postfix shows the seconds so far and the network rows queried so far
    (every decision node of a traversal asks the network once), redrawn every
    ``traversal_refresh_s`` seconds by a background thread, since a traversal
    epoch is one long call with no step to hook; then the traversal's seconds,
    nodes/s and mean inference batch; the training steps advance it;
    progress-bar metrics follow in the postfix.

    Where the output is not a terminal (CI, a file), a redrawn bar would
    flood the log: it then draws nothing and prints one line per iteration
    instead, with the iteration's seconds, the traversal's and the training's,
    nodes/s and the losses (for PPO: the rollout's and the update's seconds,
    decisions/s and the losses).

    Args:
        refresh_rate: training steps between redraws.
        leave: keep each iteration's finished bar on screen.
        lines: one line per iteration instead of a bar; None chooses lines
            when standard output is not a terminal.
        traversal_refresh_s: seconds between redraws during a traversal epoch.
    """

    @checked
    def __init__(
        self,
        refresh_rate: NonNegativeInt = 1,
        leave: bool = False,
        lines: bool | None = None,
        traversal_refresh_s: PositiveFloat = 1.0,
    ) -> None:
        super().__init__(refresh_rate=refresh_rate, leave=leave)
        self.lines = lines
        self.traversal_refresh_s = traversal_refresh_s
        self._iteration_start = 0.0
        self._traversal: dict[str, str] = {}
        self._traversal_done = threading.Event()
        self._traversal_watch: threading.Thread | None = None

    @property
    def _lines(self) -> bool:
        return not sys.stdout.isatty() if self.lines is None else self.lines

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._lines:
            self.disable()
        super().on_train_start(trainer, pl_module)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        self._iteration_start = time.perf_counter()
        self._traversal = {}
        total = "" if trainer.max_epochs in (None, -1) else f"/{trainer.max_epochs}"
        self.train_progress_bar.set_description(f"iteration {pl_module.iteration}{total}")

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self.train_progress_bar.set_postfix_str("traversal...")
        if self._lines or not trainer.is_global_zero:
            return
        self._traversal_done.clear()
        self._traversal_watch = threading.Thread(
            target=self._watch_traversal, args=(pl_module.queue,), daemon=True
        )
        self._traversal_watch.start()

    def _watch_traversal(self, queue: InferenceQueue) -> None:
        """Redraw the postfix with the rows the queue has run so far, until the epoch ends.

        Reads the queue's stats snapshot, which the traversal thread replaces after every
        flush; a stale read only shows a slightly older figure.
        """
        start = time.perf_counter()
        while not self._traversal_done.wait(self.traversal_refresh_s):
            seconds = time.perf_counter() - start
            self.train_progress_bar.set_postfix_str(
                f"traversal {seconds:.0f}s, {_si(queue.stats(wait=False).rows)} rows", refresh=True
            )

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        if self._traversal_watch is not None:
            self._traversal_done.set()
            self._traversal_watch.join()
            self._traversal_watch = None
        metrics = pl_module.iteration_metrics
        self._traversal = {
            "traversal": f"{metrics.get('time/traversal_s', 0.0):.1f}s",
            "nodes/s": _si(metrics.get("traversal/nodes_per_s", 0.0)),
            "batch": _si(metrics.get("inference/mean_batch", 0.0)),
        }
        self.train_progress_bar.set_postfix(self._traversal)

    def get_metrics(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule
    ) -> dict[str, int | str | float | dict[str, float]]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)  # the run's folder says it; the bar has little room
        return {**self._traversal, **metrics}

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self._lines and trainer.is_global_zero:
            print(self.iteration_line(trainer, pl_module), flush=True)

    def iteration_line(self, trainer: pl.Trainer, pl_module: DeepCFR) -> str:
        """The one line printed per iteration in ``lines`` mode."""
        m = pl_module.iteration_metrics
        total = "" if trainer.max_epochs in (None, -1) else f"/{trainer.max_epochs}"
        seconds = time.perf_counter() - self._iteration_start
        parts = [f"iteration {pl_module.iteration}{total}: {seconds:.1f} s"]
        if "time/rollout_s" in m:  # PPO: games played, then the update epochs
            parts += [
                f"rollout {m['time/rollout_s']:.1f} s, "
                f"{_si(m.get('rollout/decisions_per_s', 0.0))} decisions/s",
                f"update {self.total_train_batches} steps {m.get('time/update_s', 0.0):.1f} s",
            ]
        else:
            training_s = m.get("time/advantage_train_s", 0.0) + m.get("time/strategy_train_s", 0.0)
            parts += [
                f"traversal {m.get('time/traversal_s', 0.0):.1f} s, "
                f"{_si(m.get('traversal/nodes_per_s', 0.0))} nodes/s",
                f"training {self.total_train_batches} steps {training_s:.1f} s",
            ]
        losses = [
            f"{k.removeprefix('loss/')} {v:.4g}" for k, v in m.items() if k.startswith("loss/")
        ]
        if losses:
            parts.append("loss " + ", ".join(losses))
        return " | ".join(parts)
