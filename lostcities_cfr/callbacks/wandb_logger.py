"""Weights & Biases logging with this project's defaults: offline, under ``runs/``, per iteration."""

from __future__ import annotations

from typing import Any

from pytorch_lightning.loggers import WandbLogger

ITERATION = "iteration"


class IterationWandbLogger(WandbLogger):
    """A :class:`~pytorch_lightning.loggers.WandbLogger` whose x-axis is the CFR iteration.

    Every metric is charted against the logged ``iteration`` (``define_metric``
    with ``step_metric="iteration"``) rather than against Lightning's optimizer
    step count, which depends on buffer sizes and batch sizes. Runs are offline
    by default, written under ``runs/wandb/``; ``wandb sync runs/wandb/offline-run-*``
    uploads one later. The run's full config reaches W&B through
    :class:`~lostcities_cfr.callbacks.SaveConfigToLoggers`.

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
