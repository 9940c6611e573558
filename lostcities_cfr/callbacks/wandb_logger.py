"""Weights & Biases logging with this project's defaults: offline, under ``runs/``, per iteration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pytorch_lightning.loggers import WandbLogger

ITERATION = "iteration"
SWEEP_TRIAL_FILE = "sweep_trial.yaml"  # written by ``sweep`` in each trial's run folder


class IterationWandbLogger(WandbLogger):
    """A :class:`~pytorch_lightning.loggers.WandbLogger` whose x-axis is the CFR iteration.

    Every metric is charted against the logged ``iteration`` (``define_metric``
    with ``step_metric="iteration"``) rather than against Lightning's optimizer
    step count, which depends on buffer sizes and batch sizes. Runs are offline
    by default, written under ``runs/wandb/``; ``wandb sync runs/wandb/offline-run-*``
    uploads one later. The run's full config reaches W&B through
    :class:`~lostcities_cfr.callbacks.SaveConfigToLoggers`.

    A run that is a ``sweep`` trial (its folder holds ``sweep_trial.yaml``) joins the
    sweep's group, and its config gains ``sweep``: the sweep's name, the trial's number, its
    seed and its settings, so that a dashboard groups a setting's seeds into one band.

    Args:
        name: display name of the run.
        save_dir: folder of the W&B files; None: the run's folder (``fit`` fills it in,
            ``trainer.default_root_dir``), or ``runs`` outside ``fit``.
        offline: write locally only (nothing leaves the machine).
        project: the W&B project.
        **kwargs: any other :class:`WandbLogger` argument (``tags``, ``group``,
            ``entity``...).
    """

    def __init__(
        self,
        name: str | None = None,
        save_dir: str | None = None,
        offline: bool = True,
        project: str = "lostcities_cfr",
        **kwargs: Any,
    ) -> None:
        save_dir = "runs" if save_dir is None else save_dir
        trial_file = Path(save_dir) / SWEEP_TRIAL_FILE
        if trial_file.is_file():
            trial = yaml.safe_load(trial_file.read_text())
            kwargs["group"] = kwargs.get("group") or trial["sweep"]
            kwargs["config"] = {**(kwargs.get("config") or {}), "sweep": trial}
        super().__init__(name=name, save_dir=save_dir, offline=offline, project=project, **kwargs)
        self._axis_defined = False

    @property
    def experiment(self) -> Any:
        run = super().experiment
        if not self._axis_defined:
            # Replaces the "*" -> trainer/global_step rule WandbLogger defines.
            run.define_metric(ITERATION)
            run.define_metric("*", step_metric=ITERATION, step_sync=True)
            self._axis_defined = True
        return run
