"""Tiny Deep CFR runs for the training tests: tiny rules, 32x2 networks, a few updates.

A run takes a couple of seconds on a CPU, on one thread. Runs log to CSV in ``tmp_path``
(never W&B) and show no progress bar. (A module of its own, not ``conftest``, so test files
import it by a name no other test folder uses.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

TINY_MODEL = {
    "rules": "tiny",
    "network": {"width": 32, "depth": 2},
    "sampler": {
        "class_path": "lostcities_cfr.cfr.external_sampling.ExternalSampling",
        "init_args": {"walkers": 32},
    },
    "traversals_per_player": 32,
    "advantage_buffer_size": 2048,
    "strategy_buffer_size": 2048,
    "batch_size": 64,
    "advantage_updates": 6,
    "strategy_updates": 4,
    "inference_buckets": None,
    "final_eval_games": 20,
}
"""Model arguments of a tiny run, also for building :class:`DeepCFR` directly."""


def tiny_config(run_dir: Path, max_epochs: int = 3, **model: object) -> dict:
    """A whole LightningCLI config of a tiny run in ``run_dir``; ``model`` overrides fields."""
    return {
        "seed_everything": 7,
        "threads": 1,
        "trainer": {
            "max_epochs": max_epochs,
            "default_root_dir": str(run_dir),
            "logger": {
                "class_path": "pytorch_lightning.loggers.CSVLogger",
                "init_args": {"save_dir": str(run_dir), "name": "csv"},
            },
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
        },
        "model": {**TINY_MODEL, **model},
    }


def cli_subprocess(config: Path, *overrides: str, callback: dict | None = None) -> dict:
    """``subprocess`` arguments of ``python -m lostcities_cfr fit --config config ...``.

    The child imports this repository and the callbacks of ``run_probes`` (given as
    ``callback``, a class_path/init_args mapping, appended to the run's callbacks).
    """
    args = [sys.executable, "-m", "lostcities_cfr", "fit", "--config", str(config), *overrides]
    if callback is not None:
        args.append(
            f"--trainer.callbacks+={yaml.safe_dump(callback, default_flow_style=True).strip()}"
        )
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    return {"args": args, "env": env}
