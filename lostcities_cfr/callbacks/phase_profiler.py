"""``torch.profiler`` around chosen CFR iterations, with the traversal and training marked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.profiler import ProfilerActivity, profile, record_function

from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.callbacks.base import TraversalCallback
from lostcities_cfr.training.module import DeepCFR


class PhaseProfiler(TraversalCallback):
    """Profiles whole CFR iterations operator by operator, one labelled range per phase.

    Acts in each iteration listed in ``iterations``: profiling starts with the
    iteration (the first of ``on_traversal_start`` and ``on_train_epoch_start``)
    and stops at its ``on_train_epoch_end``; the ranges ``cfr/traversal``
    (``on_traversal_start`` to ``on_traversal_end``) and ``cfr/training`` (from
    the later of the traversal's end and the epoch's start, to the epoch's end)
    show up in the trace and the table. Writes, on global rank zero, to
    ``dirpath`` (default: ``<trainer.log_dir>/profile``):

    - ``iteration_<n>.json``: a Chrome trace (open it in ``chrome://tracing`` or
      https://ui.perfetto.dev);
    - ``iteration_<n>.txt``: the operators with the most self CPU time and the
      two phase ranges' totals.

    Iteration 1 runs on untrained, uniform networks, so the default profiles
    iteration 2. A full-size traversal records many small operators: profile
    few iterations.

    Args:
        iterations: CFR iterations (1-based) to profile.
        dirpath: where the files go.
        row_limit: operators listed in the text table.
        record_shapes: record input shapes (larger traces; groups the table by shape).
    """

    @checked
    def __init__(
        self,
        iterations: Sequence[PositiveInt] = (2,),
        dirpath: str | None = None,
        row_limit: PositiveInt = 25,
        record_shapes: bool = False,
    ) -> None:
        self.iterations = set(iterations)
        self.dirpath = dirpath
        self.row_limit = row_limit
        self.record_shapes = record_shapes
        self._profile: profile | None = None
        self._phase: record_function | None = None
        self._iteration: int | None = None

    def on_traversal_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self._start(pl_module.iteration)
        self._enter_phase("cfr/traversal")

    def on_traversal_end(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self._enter_phase("cfr/training")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: DeepCFR) -> None:
        self._start(pl_module.iteration)
        if self._profile is not None and self._phase is None:
            self._enter_phase("cfr/training")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._profile is None:
            return
        self._exit_phase()
        self._profile.stop()
        if trainer.is_global_zero:
            self._write(trainer, self._profile, self._iteration)
        self._profile = None

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self._profile is not None:
            self._exit_phase()
            self._profile.stop()
            self._profile = None

    def _start(self, iteration: int) -> None:
        if iteration not in self.iterations or self._iteration == iteration:
            return
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self._iteration = iteration
        self._profile = profile(activities=activities, record_shapes=self.record_shapes)
        self._profile.start()

    def _enter_phase(self, name: str) -> None:
        if self._profile is None:
            return
        self._exit_phase()
        # Entered in one hook and left in another, so not a `with` block.
        self._phase = record_function(name)
        self._phase.__enter__()

    def _exit_phase(self) -> None:
        if self._phase is not None:
            self._phase.__exit__(None, None, None)
            self._phase = None

    def _write(self, trainer: pl.Trainer, prof: profile, iteration: int) -> None:
        directory = Path(self.dirpath or Path(trainer.log_dir or ".") / "profile")
        directory.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(directory / f"iteration_{iteration}.json"))
        averages = prof.key_averages(group_by_input_shape=self.record_shapes)
        phases = [e for e in averages if e.key.startswith("cfr/")]
        lines = [f"CFR iteration {iteration}", ""]
        lines += [f"{e.key:16} {e.cpu_time_total / 1e6:10.3f} s" for e in phases]
        lines += ["", averages.table(sort_by="self_cpu_time_total", row_limit=self.row_limit)]
        path = directory / f"iteration_{iteration}.txt"
        path.write_text("\n".join(lines))
        rank_zero_info(f"PhaseProfiler: iteration {iteration} written to {path}")
