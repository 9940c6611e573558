"""A tiny ``fit`` config for a baseline model and its logged rows, shared by the baselines'
end-to-end tests (PPO, expert iteration)."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml


def write_run_config(
    run_dir: Path,
    model_class: str,
    init_args: dict[str, object],
    max_epochs: int,
    callbacks: tuple[dict[str, object], ...] = (),
) -> Path:
    """``run_dir``.yaml: ``model_class`` with ``init_args`` for ``max_epochs`` iterations on
    the CPU, logging CSV into ``run_dir`` with a line an iteration and its phase times, plus
    ``callbacks``."""
    config = {
        "seed_everything": 3,
        "threads": 1,
        "trainer": {
            "max_epochs": max_epochs,
            "default_root_dir": str(run_dir),
            "logger": {
                "class_path": "pytorch_lightning.loggers.CSVLogger",
                "init_args": {"save_dir": str(run_dir), "name": "csv"},
            },
            "callbacks": [
                {
                    "class_path": "lostcities_cfr.callbacks.IterationProgressBar",
                    "init_args": {"lines": True},
                },
                {"class_path": "lostcities_cfr.callbacks.PhaseTimer"},
                *callbacks,
            ],
            "enable_model_summary": False,
            "accelerator": "cpu",
        },
        "model": {"class_path": model_class, "init_args": init_args},
    }
    path = run_dir.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config))
    return path


def logged_rows(run_dir: Path, column: str) -> list[dict[str, str]]:
    """The rows of ``run_dir``'s CSV logs that hold ``column`` (one an iteration)."""
    rows = []
    for path in sorted(run_dir.glob("csv/version_*/metrics.csv")):
        with path.open() as file:
            rows += [row for row in csv.DictReader(file) if row.get(column)]
    return rows
