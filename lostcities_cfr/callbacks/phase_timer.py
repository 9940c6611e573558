"""Where each CFR iteration's wall-clock went, and what the process holds."""

from __future__ import annotations

import os
import resource
import sys
import time

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint

from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.callbacks.best_checkpoint import BestCheckpoint
from lostcities_cfr.callbacks.evaluation import PeriodicEvaluation
from lostcities_cfr.training import metrics

# Phases a model times itself (``iteration_metrics``: DeepCFR's, then PPO's) or evaluation
# adds; each one the model reports gets ``time/<phase>_share`` of the iteration. Network
# queries happen inside the traversal or the rollout, and buffer writes inside the
# traversal, so their shares are part of those.
PHASES = (
    "traversal",
    "policy_network",
    "memory_add",
    "advantage_train",
    "strategy_train",
    "value_train",
    "rollout",
    "update",
    "eval",
)
DISJOINT_PHASES = (
    "traversal",
    "advantage_train",
    "strategy_train",
    "value_train",
    "rollout",
    "update",
    "eval",
)
GB = 2**30


def resident_memory_bytes() -> int | None:
    """The process's resident set size now (Linux ``/proc``); None elsewhere."""
    try:
        with open("/proc/self/statm") as file:
            return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def peak_memory_bytes() -> int:
    """The process's peak resident set size (``getrusage``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class PhaseTimer(TraversalCallback):
    """Times every iteration and logs each phase's share of it, the run's clock, memory and
    buffer fill.

    Acts at the start of each iteration (the first of ``on_traversal_start`` and
    ``on_train_epoch_start``, as the model may traverse before or after the
    epoch starts) and at its end (``on_train_epoch_end``). So that the time it
    measures includes evaluation, it moves itself behind the other callbacks
    in ``setup`` (checkpoint callbacks stay last, where Lightning keeps them).

    Logs to every logger, each iteration:

    - ``time/iteration_s``: the iteration's wall-clock, evaluation included;
    - ``time/elapsed_s``: seconds since training started, at the iteration's end
      (a resumed run continues the clock where its checkpoint left it), the
      x-axis of learning curves against wall-clock (``scripts/tools/strength_curves.py``);
    - ``time/eval_s``: this iteration's :class:`PeriodicEvaluation` and
      :class:`BestCheckpoint` time (0 when none ran);
    - ``time/<phase>_share`` for each phase the model times (``DeepCFR``:
      ``traversal``, ``policy_network``, ``memory_add``, ``advantage_train``,
      ``strategy_train``; ``PPO``: ``rollout``, ``policy_network``, ``update``)
      and ``eval``: seconds over ``time/iteration_s`` (the model logs the
      seconds, ``time/<phase>_s``; network queries and buffer writes are part
      of the traversal or rollout), and ``time/other_share``: what no phase
      accounts for;
    - ``system/rss_gb`` (resident memory now, where ``/proc`` exists),
      ``system/max_rss_gb`` (peak) and, on CUDA, ``system/cuda_max_allocated_gb``;
    - ``buffer/<name>_fill``: rows held over capacity of each reservoir
      (``DeepCFR``: ``advantage_p0``, ``advantage_p1``, ``strategy``; models
      without ``row_buffers()`` log none).

    The counts and rates (``traversal/nodes_per_s``, ``inference/mean_batch``,
    ``buffer/*`` rows) are logged by the model itself.

    Args:
        memory: log the process's memory.
        buffers: log the reservoirs' fill.
    """

    def __init__(self, memory: bool = True, buffers: bool = True) -> None:
        self.memory = memory
        self.buffers = buffers
        self._started_iteration: int | None = None
        self._start = 0.0
        self._elapsed_before = 0.0  # seconds of the run before this fit (a resumed run)
        self._fit_start = 0.0
        self.elapsed_s = 0.0

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # A new list: Lightning is iterating the old one to call this very hook.
        others = [c for c in trainer.callbacks if c is not self and not isinstance(c, Checkpoint)]
        checkpoints = [c for c in trainer.callbacks if isinstance(c, Checkpoint)]
        trainer.callbacks = [*others, self, *checkpoints]

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fit_start = time.perf_counter()

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_iteration(pl_module.iteration)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_iteration(pl_module.iteration)

    def _start_iteration(self, iteration: int) -> None:
        if self._started_iteration != iteration:
            self._started_iteration = iteration
            self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        now = time.perf_counter()
        iteration_s = now - self._start
        self.elapsed_s = self._elapsed_before + now - self._fit_start
        reported = pl_module.iteration_metrics
        seconds = {
            phase: float(reported[metrics.phase_seconds(phase)])
            for phase in PHASES
            if metrics.phase_seconds(phase) in reported
        }
        seconds["eval"] = self._eval_seconds(trainer, pl_module.iteration)
        logged = {
            metrics.phase_seconds("iteration"): iteration_s,
            metrics.phase_seconds("elapsed"): self.elapsed_s,
            metrics.phase_seconds("eval"): seconds["eval"],
        }
        for phase, value in seconds.items():
            logged[metrics.phase_share(phase)] = value / iteration_s
        disjoint = sum(seconds.get(phase, 0.0) for phase in DISJOINT_PHASES)
        logged[metrics.phase_share("other")] = max(0.0, 1.0 - disjoint / iteration_s)
        if self.memory:
            logged.update(self._memory())
        if self.buffers:
            logged.update(self._buffer_fill(pl_module))
        for name, value in logged.items():
            pl_module.log(name, value, on_step=False, on_epoch=True)

    @staticmethod
    def _eval_seconds(trainer: pl.Trainer, iteration: int) -> float:
        return sum(
            c.last_seconds
            for c in trainer.callbacks
            if isinstance(c, PeriodicEvaluation | BestCheckpoint) and c.last_iteration == iteration
        )

    @staticmethod
    def _memory() -> dict[str, float]:
        memory = {"system/max_rss_gb": peak_memory_bytes() / GB}
        rss = resident_memory_bytes()
        if rss is not None:
            memory["system/rss_gb"] = rss / GB
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            memory["system/cuda_max_allocated_gb"] = torch.cuda.max_memory_allocated() / GB
        return memory

    @staticmethod
    def _buffer_fill(pl_module: pl.LightningModule) -> dict[str, float]:
        return {
            metrics.buffer_fill(name): len(buffer) / buffer.capacity
            for name, buffer in getattr(pl_module, "row_buffers", dict)().items()
        }

    def state_dict(self) -> dict[str, float]:
        return {"elapsed_s": self.elapsed_s}

    def load_state_dict(self, state_dict: dict[str, float]) -> None:
        self._elapsed_before = self.elapsed_s = state_dict.get("elapsed_s", 0.0)
