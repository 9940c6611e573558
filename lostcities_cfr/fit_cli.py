"""``python -m lostcities_cfr fit|validate``: Deep CFR experiments through LightningCLI.

A run is one YAML config (``configs/``; a callback stack from ``callbacks/`` can be added as a
second ``--config``) plus dotted overrides such as ``--model.batch_size 512``;
``--print_config`` prints the whole experiment, defaults included. What the CLI adds to
LightningCLI's defaults:

- W&B offline: the default logger is ``WandbLogger(offline=True)`` and ``WANDB_MODE``
  defaults to ``offline``, so nothing needs the network (``wandb sync`` uploads later).
- One folder per run: ``trainer.default_root_dir`` (``runs/...``); checkpoints go to its
  ``checkpoints/`` (an argument link, so ``fit --ckpt_path last`` finds them again): the
  latest iteration's after every iteration, and ``last.ckpt`` linking to it. The saved
  ``config.yaml`` is overwritten, so a run can be repeated or resumed in the same folder.
- ``seed_everything`` (0 by default) also seeds the model's own generators
  (``model.seed`` is linked to it).
- ``threads``: torch's CPU threads. Small networks train fastest on one thread, and on a
  machine with other busy processes extra threads wait on each other (``docs/performance.md``).
- A :class:`~lostcities_cfr.errors.ConfigError` from building the model exits with its
  message, before any game is played.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI

from lostcities_cfr.callbacks import SaveConfigToLoggers
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training.module import DeepCFR

DEFAULT_ROOT_DIR = "runs/deep_cfr"
TRAINER_DEFAULTS = {
    "default_root_dir": DEFAULT_ROOT_DIR,
    "max_epochs": 100,
    "log_every_n_steps": 1,  # the module logs once per iteration; this only silences a warning
    # W&B (offline, x-axis the CFR iteration) and a CSV file that ``report`` plots without W&B.
    "logger": [
        {
            "class_path": "lostcities_cfr.callbacks.IterationWandbLogger",
            "init_args": {"save_dir": DEFAULT_ROOT_DIR, "project": "lostcities_cfr"},
        },
        {
            "class_path": "pytorch_lightning.loggers.CSVLogger",
            # Written after every iteration, so that ``report`` can plot a run in progress.
            "init_args": {
                "save_dir": DEFAULT_ROOT_DIR,
                "name": "csv",
                "flush_logs_every_n_steps": 1,
            },
        },
    ],
}


def checkpoint_dir(default_root_dir: str | None) -> str:
    """Where a run's checkpoints go: ``<default_root_dir>/checkpoints``."""
    return str(Path(default_root_dir or ".") / "checkpoints")


def model_seed(seed_everything: bool | int) -> int:
    """The model's seed from ``seed_everything`` (an int, or a bool meaning "no seed given")."""
    return 0 if isinstance(seed_everything, bool) else seed_everything


class DeepCFRCLI(LightningCLI):
    """LightningCLI for :class:`DeepCFR` with the run-folder and seeding conventions above."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                # One file, the latest iteration's, with last.ckpt a link to it: reservoirs make
                # checkpoints big.
                "checkpoint.save_top_k": 1,
                "checkpoint.save_last": "link",
                "checkpoint.every_n_epochs": 1,
                "checkpoint.save_on_train_epoch_end": True,
            }
        )
        parser.link_arguments("trainer.default_root_dir", "checkpoint.dirpath", checkpoint_dir)
        parser.link_arguments("seed_everything", "model.seed", model_seed)
        parser.add_argument(
            "--threads",
            type=int | None,
            default=None,
            help="torch CPU threads (torch.set_num_threads); null keeps torch's default",
        )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        threads = config["threads"]
        if threads is not None:
            if threads < 1:
                raise ConfigError(f"threads={threads}; expected at least 1, or null")
            torch.set_num_threads(threads)


def build_cli(args: list[str], run: bool = True) -> DeepCFRCLI:
    """The CLI on ``args``: with ``run``, a subcommand and its arguments, which it runs;
    without, the model and trainer of a config, built and not run."""
    os.environ.setdefault("WANDB_MODE", "offline")
    # ``args`` usually is sys.argv[1:] minus the command, which LightningCLI warns about.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
    return DeepCFRCLI(
        DeepCFR,
        args=args,
        run=run,
        seed_everything_default=0,
        trainer_defaults=TRAINER_DEFAULTS,
        save_config_callback=SaveConfigToLoggers,
        save_config_kwargs={"overwrite": True},
        auto_configure_optimizers=False,
    )


def run(subcommand: str, argv: list[str]) -> DeepCFRCLI:
    """Run ``subcommand`` (``fit`` or ``validate``); a ConfigError exits with its message."""
    try:
        return build_cli([subcommand, *argv])
    except ConfigError as error:
        print(f"python -m lostcities_cfr {subcommand}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def fit(argv: list[str]) -> None:
    """``python -m lostcities_cfr fit``: train a Deep CFR agent."""
    run("fit", argv)


def validate(argv: list[str]) -> None:
    """``python -m lostcities_cfr validate``: evaluate a checkpoint's average strategy."""
    run("validate", argv)
