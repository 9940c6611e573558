"""Lightning's CSV logger with this project's defaults: in the run's folder, flushed every
iteration."""

from __future__ import annotations

from pytorch_lightning.loggers import CSVLogger


class IterationCSVLogger(CSVLogger):
    """A :class:`~pytorch_lightning.loggers.CSVLogger` that logs where the run lives.

    Its ``save_dir`` may stay unset: ``fit`` then gives it the run's folder
    (``trainer.default_root_dir``), so a run moved with ``--trainer.default_root_dir`` (each
    ``sweep`` trial is) moves its ``metrics.csv`` too. It writes the file after every
    iteration, so that ``report`` and ``sweep`` read a run in progress.

    Args:
        save_dir: folder of ``NAME/version_N/metrics.csv``; None: the run's folder (``runs``
            outside ``fit``).
        name: the subfolder.
        flush_logs_every_n_steps: rows held before a write (the module logs once an iteration).
        **kwargs: any other :class:`CSVLogger` argument (``version``, ``prefix``).
    """

    def __init__(
        self,
        save_dir: str | None = None,
        name: str = "csv",
        flush_logs_every_n_steps: int = 1,
        **kwargs: object,
    ) -> None:
        save_dir = "runs" if save_dir is None else save_dir
        super().__init__(
            save_dir, name=name, flush_logs_every_n_steps=flush_logs_every_n_steps, **kwargs
        )
