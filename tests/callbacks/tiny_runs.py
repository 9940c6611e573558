"""Tiny Deep CFR runs for the callback tests: tiny rules, small networks, a CSV log."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.loggers import CSVLogger, Logger

from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.training import DeepCFR

# The logged metric names (docs/architecture.md, "Logged metrics").
DESIGN_METRICS = (
    "time/iteration_s",
    "time/traversal_s",
    "time/policy_network_s",
    "time/advantage_train_s",
    "time/strategy_train_s",
    "time/eval_s",
    "traversal/nodes",
    "traversal/nodes_per_s",
    "inference/mean_batch",
    "buffer/advantage_p0",
    "buffer/strategy",
    "loss/advantage_p0",
    "loss/strategy",
)
EVAL_SUFFIXES = ("win_rate", "win_rate_ci_low", "win_rate_ci_high", "score_diff")


def tiny_cli_model() -> dict:
    """The ``model`` section of a LightningCLI config for a tiny run, a fresh copy per call.

    Smaller than :func:`tiny_model`: runs through the CLI parse configs and start loggers
    too, so their model is kept to seconds.
    """
    return {
        "rules": "tiny",
        "network": {
            "class_path": "lostcities_cfr.cfr.networks.NetworkConfig",
            "init_args": {"width": 16, "depth": 1},
        },
        "traversals_per_player": 16,
        "advantage_buffer_size": 2000,
        "strategy_buffer_size": 2000,
        "batch_size": 32,
        "advantage_updates": 4,
        "strategy_updates": 4,
        "final_eval_games": 0,
    }


def tiny_model(**overrides) -> DeepCFR:
    arguments = {
        "rules": "tiny",
        "network": NetworkConfig(width=32, depth=2),
        "traversals_per_player": 32,
        "advantage_buffer_size": 4000,
        "strategy_buffer_size": 4000,
        "batch_size": 64,
        "advantage_updates": 8,
        "strategy_updates": 8,
        "final_eval_games": 0,
    } | overrides
    return DeepCFR(**arguments)


def fit(
    tmp_path: Path,
    callbacks: Sequence[pl.Callback],
    max_epochs: int = 3,
    loggers: Sequence[Logger] | None = None,
    model: DeepCFR | None = None,
    **trainer_args,
) -> tuple[pl.Trainer, DeepCFR]:
    """Fit a tiny model for ``max_epochs`` iterations; logs to a CSVLogger in ``tmp_path``."""
    model = tiny_model() if model is None else model
    defaults = {"enable_checkpointing": False, "enable_progress_bar": False}
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        default_root_dir=tmp_path,
        logger=list(loggers) if loggers is not None else CSVLogger(tmp_path, name="csv"),
        callbacks=list(callbacks),
        enable_model_summary=False,
        **(defaults | trainer_args),
    )
    trainer.fit(model)
    return trainer, model


def read_csv_metrics(trainer: pl.Trainer) -> list[dict[str, float]]:
    """The CSVLogger's rows, empty cells dropped, values as floats."""
    logger = next(lg for lg in trainer.loggers if isinstance(lg, CSVLogger))
    with open(Path(logger.log_dir) / "metrics.csv", newline="") as file:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(file)]
