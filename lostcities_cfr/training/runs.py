"""A run's folder and its resumption: what ``--ckpt_path`` means, and what a resume may change.

One folder holds one run: ``trainer.default_root_dir`` with its ``checkpoints/`` (the latest
iteration's checkpoint and ``last.ckpt`` linking to it), its logs and ``config.yaml``. The
``fit`` command (:mod:`lostcities_cfr.commands.fit`) applies these rules before any work starts:

- ``--ckpt_path last`` is ``checkpoints/last.ckpt`` of the run folder, and it must exist;
  ``--ckpt_path last_if_present`` starts afresh when there is none (a job that is simply
  started again after a preemption). Any other value names a checkpoint file.
- A new run needs a folder that holds no other run, so ``last.ckpt`` and the logs never mix
  two runs; only a resume of the folder's own checkpoints writes into a used folder.
- What runs is what the command line says. The model arguments that built the checkpoint's
  state must be the same on the command line as in the checkpoint; those in
  :data:`RESUMABLE_OVERRIDES` (how the networks are fitted and evaluated from now on) may
  change, and the command line's value is used.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training.checkpoint import trained_iterations

LAST = "last"
LAST_IF_PRESENT = "last_if_present"
LAST_FILE = "last.ckpt"
CONFIG_FILE = "config.yaml"  # what SaveConfigCallback writes at every start of a run

RESUMABLE_OVERRIDES = frozenset(
    {
        "learning_rate",
        "gradient_clip",
        "batch_size",
        "rank_scaling",
        "advantage_updates",
        "strategy_updates",
        "strategy_every",
        "inference_buckets",
        "exploitability_every",
        "final_eval_games",
        "eval_opponent",
        "value_updates",
        "weight_decay",
        "color_augmentation",
        "deploy",
        "alternate_updates",
        "optimizer_kernel",
        "engine_kernels",
        "update_graphs",
    }
)
"""Model arguments a resume may change. The others (rules, networks, sampler, traversals per
player, buffer sizes and holdout, warm start, weight exponent, seed) made the checkpoint's
networks and reservoirs and must match them."""


def resolve_ckpt_path(ckpt_path: str | None, checkpoint_dir: str | Path) -> Path | None:
    """The checkpoint file ``--ckpt_path`` names, or ``None`` for a fresh start.

    Raises:
        ConfigError: ``last`` without a checkpoint, a ``last.ckpt`` that links to a missing
            file, or a path that is no file.
    """
    if ckpt_path is None:
        return None
    if ckpt_path not in (LAST, LAST_IF_PRESENT):
        path = Path(ckpt_path)
        if not path.is_file():
            raise ConfigError(
                f"ckpt_path={ckpt_path!r}: no such file; expected a checkpoint file, "
                f"'{LAST}' or '{LAST_IF_PRESENT}'"
            )
        return path
    last = Path(checkpoint_dir) / LAST_FILE
    if last.is_file():
        # The link itself, not its target: Lightning keeps the file a run resumed from, and
        # the target is the checkpoint this run's first one replaces.
        return last
    if last.is_symlink():
        others = [p for p in last.parent.glob("*.ckpt") if p.is_file() and p != last]
        others.sort(key=lambda p: p.stat().st_mtime)
        hint = f"--ckpt_path {others[-1]}" if others else "none is left in the folder"
        raise ConfigError(
            f"ckpt_path={ckpt_path}: {last} links to {os.readlink(last)}, which is missing; "
            f"resume from a checkpoint that exists ({hint})"
        )
    if ckpt_path == LAST_IF_PRESENT:
        return None
    raise ConfigError(
        f"ckpt_path={LAST}: there is no {last} to resume from; start without --ckpt_path, or "
        f"pass --ckpt_path {LAST_IF_PRESENT} to start afresh when there is none"
    )


def check_run_folder(run_dir: str | Path, checkpoint_dir: str | Path, resume: Path | None) -> None:
    """Refuse a run that would write into a folder holding another run.

    A folder holds a run once a run has started in it: its checkpoint folder holds files, or
    a ``config.yaml`` lies at or below it (every start writes one, where its first logger
    logs). Other files (a config kept beside the runs) do not count.

    Args:
        run_dir: ``trainer.default_root_dir``.
        checkpoint_dir: where the run's checkpoints go.
        resume: the checkpoint the run continues, if any; a checkpoint of this very folder
            makes the run that folder's own.

    Raises:
        ConfigError: names the folder, what it holds, and the ways out.
    """
    run_dir, checkpoint_dir = Path(run_dir), Path(checkpoint_dir)
    if _continues(resume, checkpoint_dir):
        return
    held = sorted(checkpoint_dir.iterdir()) if checkpoint_dir.is_dir() else []
    held += sorted(run_dir.rglob(CONFIG_FILE)) if run_dir.is_dir() else []
    if held:
        shown = ", ".join(str(p) for p in held[:3]) + (", ..." if len(held) > 3 else "")
        action = f"a run starting from {resume}" if resume is not None else "a new run"
        raise ConfigError(
            f"trainer.default_root_dir={run_dir} already holds a run ({shown}); {action} "
            f"needs a folder of its own: resume that run with --ckpt_path {LAST}, choose "
            "another --trainer.default_root_dir, or delete the folder"
        )


def loggers_follow_run(trainer: Any) -> None:
    """Give every logger whose ``save_dir`` is unset the run's folder (``default_root_dir``).

    The shipped configs name the run's folder once, so ``--trainer.default_root_dir`` (what
    ``sweep`` gives each trial) moves the logs with the checkpoints; a logger that names a
    folder of its own keeps it, and :func:`check_log_folders` guards it.

    Args:
        trainer: the parsed ``trainer`` section (``logger``: one logger's ``class_path`` and
            ``init_args``, a list of them, or a bool), changed in place.
    """
    loggers = trainer.logger
    if isinstance(loggers, bool) or loggers is None:
        return
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        init_args = getattr(logger, "init_args", None)
        if init_args is not None and init_args.get("save_dir") is None:
            init_args.save_dir = trainer.default_root_dir


def check_log_folders(
    log_dirs: dict[str, str | Path],
    run_dir: str | Path,
    checkpoint_dir: str | Path | None,
    resume: Path | None,
) -> None:
    """Refuse a run whose loggers log into another run's folder, outside its own.

    ``check_run_folder`` guards ``trainer.default_root_dir``; a config's loggers name their
    own folders, and a run moved with ``--trainer.default_root_dir`` alone would still write
    its ``config.yaml`` over the other run's and its logs beside them. A resume of this
    folder's run may log where it logged.

    Args:
        log_dirs: each logger's folder, by a name for the message.
        run_dir, checkpoint_dir, resume: as in :func:`check_run_folder`.

    Raises:
        ConfigError: names the logger, its folder and what it holds.
    """
    if checkpoint_dir is not None and _continues(resume, checkpoint_dir):
        return
    root = Path(run_dir).resolve()
    for name, folder in log_dirs.items():
        folder = Path(folder)
        if folder.resolve().is_relative_to(root) or not folder.is_dir():
            continue
        held = sorted(folder.rglob(CONFIG_FILE))
        if held:
            raise ConfigError(
                f"the {name} folder {folder} holds another run ({held[0]}) outside "
                f"trainer.default_root_dir={run_dir}; its config.yaml would be replaced and "
                "the logs mixed: set the logger's save_dir to the new run's folder too"
            )


def _continues(resume: Path | None, checkpoint_dir: str | Path) -> bool:
    """The run resumes from a checkpoint of its own checkpoint folder: that folder's run."""
    return resume is not None and resume.resolve().parent == Path(checkpoint_dir).resolve()


def check_max_epochs(checkpoint: dict[str, Any], max_epochs: int | None, path: Path) -> None:
    """Refuse a resume whose ``trainer.max_epochs`` lies below the iterations already run
    (Lightning would stop it with a traceback once the checkpoint is loaded)."""
    done = trained_iterations(checkpoint)
    if max_epochs not in (None, -1) and done > max_epochs:
        raise ConfigError(
            f"trainer.max_epochs={max_epochs}: {path} has already run {done} iterations; "
            f"set it to {done + 1} or more to continue the run"
        )


def check_resumable(saved: dict[str, Any], wanted: dict[str, Any], path: Path) -> None:
    """Refuse a resume whose command line changes a model argument that made the state.

    Args:
        saved: the checkpoint's model arguments (plain data).
        wanted: the command line's model arguments, as LightningCLI dumps them.
        path: the checkpoint, for the message.

    Raises:
        ConfigError: names every differing field with both values.
    """
    saved_flat, wanted_flat = _flatten(saved), _flatten(wanted)
    differing = [
        f"model.{name}: checkpoint {saved_flat.get(name)!r}, command line {wanted_flat.get(name)!r}"
        for name in sorted(saved_flat.keys() | wanted_flat.keys())
        if name.split(".")[0] not in RESUMABLE_OVERRIDES
        and saved_flat.get(name) != wanted_flat.get(name)
    ]
    if differing:
        raise ConfigError(
            f"ckpt_path={path}: the run it continues was built with other settings "
            f"({'; '.join(differing)}); resume with that run's config.yaml, or start a new "
            f"run. A resume may change only {', '.join(sorted(RESUMABLE_OVERRIDES))}"
        )


def with_added_defaults(saved: dict[str, Any], model_class: type) -> dict[str, Any]:
    """``saved`` (a checkpoint's model arguments) with every argument ``model_class`` has
    gained since, at its default: the run was built before the argument existed, so it ran
    as the default does (an option is added with the old behaviour as its default)."""
    parameters = inspect.signature(model_class).parameters
    added = {
        name: parameter.default
        for name, parameter in parameters.items()
        if name not in saved and parameter.default is not inspect.Parameter.empty
    }
    return added | saved


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted names, so a difference names its innermost field."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat |= _flatten(value, f"{name}.")
        else:
            flat[name] = value
    return flat


def check_writable(folders: dict[str, str | Path]) -> None:
    """Create each folder and write a probe file in it, so that a run that could not save
    its checkpoints or logs stops before its first iteration rather than after it.

    Args:
        folders: what each folder is for (``"run"``, ``"checkpoint"``) -> its path.

    Raises:
        ConfigError: names the folder, its purpose and the system's reason.
    """
    for purpose, folder in folders.items():
        probe = Path(folder) / ".write-test"
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise ConfigError(
                f"the {purpose} folder {folder} cannot be written "
                f"({error.strerror or error}); choose a writable --trainer.default_root_dir"
            ) from None
