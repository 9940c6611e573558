"""``python -m lostcities_cfr fit|validate``: Deep CFR experiments through LightningCLI.

A run is one YAML config (``configs/``; a callback stack from ``callbacks/`` can be added as a
second ``--config``) plus dotted overrides such as ``--model.batch_size 512``;
``--print_config`` prints the whole experiment, defaults included. What the CLI adds to
LightningCLI's defaults:

- The model is :class:`DeepCFR` unless the config names another LightningModule with
  ``model: {class_path: ..., init_args: ...}`` (``configs/ppo.yaml`` trains
  :class:`~lostcities_cfr.baselines.PPO`); a plain ``model:`` mapping holds DeepCFR's
  arguments.
- W&B offline: the default logger is ``WandbLogger(offline=True)`` and ``WANDB_MODE``
  defaults to ``offline``, so nothing needs the network (``wandb sync`` uploads later).
- One folder per run: ``trainer.default_root_dir`` (``runs/...``); every logger that names
  no ``save_dir`` logs there (:func:`~lostcities_cfr.training.runs.loggers_follow_run`), and
  checkpoints go to its ``checkpoints/`` (an argument link, so ``fit --ckpt_path last`` finds them again): the
  latest iteration's after every iteration, and ``last.ckpt`` linking to it. A new run refuses
  a folder that holds another; ``--ckpt_path last`` resumes the folder's run, and a resume
  honours the command line, refusing changes to what made the checkpoint
  (:mod:`lostcities_cfr.training.runs`). The saved ``config.yaml`` is what ran, the checkpoint it
  resumed from included.
- Checkpoints load with ``weights_only=True`` (tensors and plain data only) and are written
  straight to disk (:class:`~lostcities_cfr.training.checkpoint.StreamingCheckpointIO`).
- ``seed_everything`` (0 by default) also seeds the model's own generators
  (``model.seed`` is linked to it).
- ``threads``: torch's CPU threads. Small networks train fastest on one thread, and on a
  machine with other busy processes extra threads wait on each other (``docs/performance.md``).
- Bad values exit with one line naming them, before any game is played: a value outside
  its argument's type (``PositiveInt``, ``Literal[...]``: :mod:`lostcities_cfr.arguments`)
  while the config is parsed, a :class:`~lostcities_cfr.errors.LostCitiesError`, or what
  jsonargparse and Lightning raise while the model, trainer, loggers and callbacks are
  built. An error of ours during the run (a non-finite loss) exits with its line too.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import warnings
from importlib import import_module
from pathlib import Path
from typing import Any, NoReturn

import pytorch_lightning as pl
import torch
import yaml
from lightning_fabric.utilities.exceptions import MisconfigurationException
from pytorch_lightning.callbacks import Timer
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI
from pytorch_lightning.strategies.launchers.subprocess_script import _SubprocessScriptLauncher
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from lostcities_cfr.arguments import PositiveInt
from lostcities_cfr.callbacks import InterruptGuard, RunCheckpoint, SaveConfigToLoggers
from lostcities_cfr.errors import ConfigError, LostCitiesError, LostRankError
from lostcities_cfr.training import runs, shards
from lostcities_cfr.training.checkpoint import (
    DEFAULT_MODEL_CLASS,
    MODEL_CLASS_KEY,
    check_finite_weights,
    class_path,
    class_paths,
    hyperparameters,
    read_checkpoint,
)
from lostcities_cfr.training.deep_cfr_arguments import check_update_graphs
from lostcities_cfr.training.distributed import (
    check_cluster_environment,
    lost_peer,
    lost_peer_message,
)
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
            "init_args": {"project": "lostcities_cfr"},
        },
        # Written after every iteration, so that ``report`` can plot a run in progress.
        {"class_path": "lostcities_cfr.callbacks.IterationCSVLogger"},
    ],
    "plugins": [{"class_path": "lostcities_cfr.training.checkpoint.StreamingCheckpointIO"}],
}


def checkpoint_dir(default_root_dir: str | None) -> str:
    """Where a run's checkpoints go: ``<default_root_dir>/checkpoints``."""
    return str(Path(default_root_dir or ".") / "checkpoints")


def model_seed(seed_everything: bool | int) -> int:
    """The model's seed from ``seed_everything`` (an int, or a bool meaning "no seed given")."""
    return 0 if isinstance(seed_everything, bool) else seed_everything


class OneLineErrorParser(LightningArgumentParser):
    """LightningCLI's parser, refusing a value with one line that names the field.

    jsonargparse prints the usage text and a message of many lines for a value that does not
    parse (one line per member of a union type); this raises a
    :class:`~lostcities_cfr.errors.ConfigError` with the field, the value and the reason on
    one line instead, which :func:`run` prints (``--help`` lists the arguments).
    """

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # jsonargparse trying a type: its exception is the answer
            super().error(message, ex)
        raise ConfigError(_one_line(message)) from None


class DeepCFRCLI(LightningCLI):
    """LightningCLI for :class:`DeepCFR` with the run-folder and seeding conventions above."""

    _resume: Path | None = None  # the checkpoint a fit continues (_parse_ckpt_path)
    _resume_checkpoint: dict[str, Any] | None = None  # its contents, memory-mapped

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_lightning_class_args(RunCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                # One file, the latest iteration's, with last.ckpt a link to it: reservoirs make
                # checkpoints big.
                "checkpoint.save_top_k": 1,
                "checkpoint.save_last": "link",
                "checkpoint.every_n_epochs": 1,
                "checkpoint.save_on_train_epoch_end": True,
                # last.ckpt is replaced, never joined by last-v1.ckpt (a resumed run in a
                # moved folder would otherwise leave last.ckpt on an old iteration).
                "checkpoint.enable_version_counter": False,
            }
        )
        parser.link_arguments("trainer.default_root_dir", "checkpoint.dirpath", checkpoint_dir)
        # The model class is chosen by model.class_path, DeepCFR by default.
        parser.set_defaults({"model": {"class_path": class_path(DeepCFR)}})
        parser.link_arguments("seed_everything", "model.init_args.seed", model_seed)
        parser.add_argument(
            "--threads",
            type=PositiveInt | None,
            default=None,
            help="torch CPU threads (torch.set_num_threads); null keeps torch's default",
        )

    def _prepare_subcommand_parser(
        self, klass: type, subcommand: str, **kwargs: Any
    ) -> LightningArgumentParser:
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        # Trainer.fit's own argument, known only once the subcommand's arguments are added.
        parser.set_defaults({"weights_only": True})
        return parser

    def _parse_ckpt_path(self) -> None:
        # Replaces LightningCLI's, which loads the checkpoint's model arguments over the
        # command line's: here the command line wins, and the checkpoint must fit it.
        subcommand = self.config.get("subcommand")
        if subcommand is None:
            return
        config = self.config[subcommand]
        checkpoint_dir = config.checkpoint.dirpath
        resume = runs.resolve_ckpt_path(config.ckpt_path, checkpoint_dir)
        if subcommand == "fit" and _first_process():
            runs.check_run_folder(config.trainer.default_root_dir, checkpoint_dir, resume)
        self._resume = resume  # for the loggers' folders, checked once they are built
        # config.yaml then names the file this run started from (or none).
        config.ckpt_path = None if resume is None else str(resume)
        if resume is None:
            return
        checkpoint = read_checkpoint(resume, mmap=True)
        self._resume_checkpoint = checkpoint  # its training state is checked once built
        model_class = checkpoint.get(MODEL_CLASS_KEY, DEFAULT_MODEL_CLASS)
        # jsonargparse may shorten the class path (lostcities_cfr.DeepCFR): compare classes
        module, _, name = config.model.class_path.rpartition(".")
        model = getattr(import_module(module), name)
        trained = class_path(model)
        if model_class != trained:
            raise ConfigError(
                f"ckpt_path={resume}: a checkpoint of {model_class}; this command trains {trained}"
            )
        check_finite_weights(checkpoint, resume)
        if subcommand == "fit":
            runs.check_max_epochs(checkpoint, config.trainer.max_epochs, resume)
        dump = self.parser.dump(self.config, skip_link_targets=False, skip_none=False)
        wanted = yaml.safe_load(dump)[subcommand]["model"]["init_args"]
        # The classes this command's own config names are imported already.
        saved = hyperparameters(checkpoint, resume, allowed=class_paths(wanted))
        runs.check_resumable(runs.with_added_defaults(saved, model), wanted, resume)

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        if self.subcommand == "fit":
            runs.loggers_follow_run(config.trainer)  # a logger's unset save_dir: the run's folder
        threads = config["threads"]
        if threads is not None:
            torch.set_num_threads(threads)
            # Lightning's DDP launcher sets torch's threads to the cores over the ranks of a
            # node unless OMP_NUM_THREADS is set: two nodes of one rank on one host then ran
            # two threads a rank on two cores, 8x slower (docs/performance.md). The ranks it
            # launches inherit this too.
            os.environ["OMP_NUM_THREADS"] = str(threads)
        if self.subcommand and config.get("weights_only") is False:
            raise ConfigError(
                "weights_only=False: checkpoints load with weights_only=True here (tensors "
                "and plain data, which cannot run code), and fit writes nothing else"
            )

    def instantiate_classes(self) -> None:
        # Building the model, trainer, loggers and callbacks does no work yet, so a failure
        # here is a bad value; jsonargparse and Lightning would report it as a traceback.
        try:
            super().instantiate_classes()
        except (ValueError, MisconfigurationException) as error:
            raise ConfigError(_reason(error)) from None

    def after_instantiate_classes(self) -> None:
        if self.subcommand != "fit":
            return
        if self.model.hparams.get("update_graphs"):  # refused here, before anything is written
            check_update_graphs(self.trainer.strategy.root_device, str(self.trainer.precision))
        check_cluster_environment(self.trainer)
        key = getattr(self.model, "training_state_key", None)
        checkpoint, self._resume_checkpoint = self._resume_checkpoint, None  # unmapped after
        if checkpoint is not None and key is not None:
            # Every rank's rows must reach this run's ranks: refused before anything is written.
            shards.check_resume(self._resume, checkpoint.get(key), self.trainer.world_size)
        _time_limit_between_iterations(self.trainer, self.config.fit.trainer.max_time)
        self.trainer.callbacks.append(InterruptGuard())
        if not _first_process():
            return
        folders = {"run": self.trainer.default_root_dir}
        if self.trainer.checkpoint_callback is not None:
            folders["checkpoint"] = self.trainer.checkpoint_callback.dirpath
        logs = {f"{type(logger).__name__} log": logger.save_dir for logger in self.trainer.loggers}
        logs = {name: folder for name, folder in logs.items() if folder is not None}
        folders.update(logs)
        runs.check_log_folders(
            logs, self.trainer.default_root_dir, folders.get("checkpoint"), self._resume
        )
        runs.check_writable({purpose: f for purpose, f in folders.items() if f is not None})

    def _run_subcommand(self, subcommand: str) -> None:
        try:
            super()._run_subcommand(subcommand)
        except Exception as error:
            trainer = self.trainer
            if trainer.world_size == 1 or not lost_peer(error):
                raise
            # This node's other ranks stop now rather than at their next collective.
            launcher = trainer.strategy.launcher
            if isinstance(launcher, _SubprocessScriptLauncher):
                launcher.kill(signal.SIGKILL)
            message = lost_peer_message(error, trainer.global_rank, trainer.world_size)
            raise LostRankError(message) from None


def build_cli(args: list[str], run: bool = True) -> DeepCFRCLI:
    """The CLI on ``args``: with ``run``, a subcommand and its arguments, which it runs;
    without, the model and trainer of a config, built and not run."""
    os.environ.setdefault("WANDB_MODE", "offline")
    # ``args`` usually is sys.argv[1:] minus the command, which LightningCLI warns about.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
    return DeepCFRCLI(
        pl.LightningModule,
        subclass_mode_model=True,
        args=args,
        run=run,
        seed_everything_default=0,
        trainer_defaults=TRAINER_DEFAULTS,
        save_config_callback=SaveConfigToLoggers,
        save_config_kwargs={"overwrite": True},
        auto_configure_optimizers=False,
        parser_class=OneLineErrorParser,
    )


def _time_limit_between_iterations(trainer: pl.Trainer, max_time: Any) -> None:
    """Make ``trainer.max_time`` end the run between two iterations, never inside one.

    Lightning's ``Timer`` checks the time after every training step, so a time limit would
    cut an iteration after its traversal and a few updates: its networks half-trained, its
    rows in the reservoirs, and a checkpoint of it that a resume would traverse again. Checked
    after each iteration instead, the run ends up to one iteration past ``max_time``.
    """
    if max_time is None:
        return
    trainer.callbacks = [
        Timer(duration=max_time, interval="epoch") if isinstance(c, Timer) else c
        for c in trainer.callbacks
    ]


def _first_process() -> bool:
    """Whether this is the process that starts a run (not a DDP rank it launched)."""
    return rank_zero_only.rank == 0 and os.environ.get("NODE_RANK", "0") == "0"


def _reason(error: BaseException) -> str:
    """One line for a failed build: our own error where jsonargparse wrapped one, else
    jsonargparse's or Lightning's message on one line."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, LostCitiesError):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return _one_line(str(error)) or type(error).__name__


# Lines of jsonargparse's messages that frame the reasons rather than give one.
_FRAMING = re.compile(
    r"(Does not validate against any|Problem with given class_path|Given value|Subtypes:|Errors:)"
)
# Reasons of the union members a value was not meant for: a plain type (``str`` where a
# mapping was given), a dataclass read from a file, or Lost Cities' ``Rules`` (which takes no
# subclass) where another game's class_path was given.
_OTHER_MEMBER = re.compile(r"(Expected a <class |Expected a path but|Subclasses are disabled for)")


def _one_line(message: str) -> str:
    """jsonargparse's message on one line: ``field=value: reason; reason``.

    The field joins the keys it names (``model.sampler.walkers``); where a restricted type
    refused the value (``Not of type PositiveInt: ...``), that is the reason, else every
    reason but those of the union members the value was not meant for.
    """
    keys, reasons, value = [], [], None
    for line in message.splitlines():
        line = line.strip().removeprefix("- ")
        key = re.match(r'Parser key "([^"]+)":\s*(.*)', line)
        if key:
            keys.append(key[1])
            line = key[2]
        if line.startswith("Given value: "):
            value = line.removeprefix("Given value: ")
            nested = re.fullmatch(r"NestedArg\(key='(.*)', val='(.*)'\)", value)
            if nested:  # a dotted override such as --model.sampler.init_args.walkers 0
                named = nested[1].replace("init_args.", "")
                keys += [] if ".".join(keys).endswith(named) else [named]
                value = nested[2]
        if line and not _FRAMING.match(line) and line not in reasons:
            reasons.append(line)
    ranges = [reason for reason in reasons if reason.startswith("Not of type")]
    meant = [reason for reason in reasons if not _OTHER_MEMBER.match(reason)]
    reason = "; ".join(ranges or meant or reasons)
    refused = re.match(r"Not of type \w+: (.*) does not conform", ranges[0]) if ranges else None
    if refused:  # the value itself, not the mapping of a model chosen by class_path
        value = refused[1]
    elif value is not None and value.startswith("{"):
        # a choice (a Literal) refused inside that mapping names the value it got
        got = re.search(r"Got value: (.+)$", reason)
        value = got[1] if got else value
    field = ".".join(keys) + ("" if value is None else f"={value}")
    return f"{field}: {reason}" if keys else reason


def run(subcommand: str, argv: list[str]) -> DeepCFRCLI:
    """Run ``subcommand`` (``fit`` or ``validate``); an error of ours exits with its message."""
    try:
        return build_cli([subcommand, *argv])
    except LostCitiesError as error:
        print(f"python -m lostcities_cfr {subcommand}: error: {error}", file=sys.stderr)
        raise SystemExit(getattr(error, "exit_code", 2)) from None


def fit(argv: list[str]) -> None:
    """``python -m lostcities_cfr fit``: train a Deep CFR agent (or the config's model)."""
    run("fit", argv)


def validate(argv: list[str]) -> None:
    """``python -m lostcities_cfr validate``: evaluate a checkpoint's average strategy."""
    run("validate", argv)
