"""Models and agents from checkpoint files (the ``ckpt:PATH[:current][:greedy]`` and
``best[:greedy]`` agent specs).

Loading is safe: a file is read with ``torch.load(weights_only=True)``, which builds tensors
and plain data only and refuses anything else, so a crafted file cannot run code. Models
therefore keep everything they save beside their weights as plain data
(:func:`plain_data`: a sampler becomes its ``class_path`` and ``init_args``).

A checkpoint names its model's class under the plain key ``model_class`` (``DeepCFR`` where it
is missing, as in checkpoints older than the key); only classes on an allow-list are built,
and a module adds its own with :func:`register_model_class`. The model is rebuilt from its
hyperparameters by their types (LightningCLI's ``instantiate_module``), never by a function a
file names. A class path inside them (a sampler, a network) is imported, which runs its
module's code, so it must lie in this package or in torch, or be allowed: by
:func:`allow_class_path` in the process that loads, or, for the command line, by the
environment variable ``LOSTCITIES_CFR_CLASS_PATHS`` (comma-separated class paths). ``fit
--ckpt_path`` allows the class paths its own config names. A loadable model offers ``rules``
and ``agent(policy, greedy, seed)``, as
:class:`~lostcities_cfr.training.evaluation.PolicyModel` describes.

:func:`networks_only` cuts a training checkpoint down to what playing needs (the class, its
arguments and the networks): the package ships one, ``pretrained/best.pt``, the strongest agent
a 30-minute run trains (``docs/agents.md``), which the ``best`` agent spec plays.

Importing this module registers the ``ckpt`` and ``best`` agent kinds, so the agent layer
below never imports training.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import os
import zipfile
from argparse import ArgumentError
from collections.abc import Collection, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins import TorchCheckpointIO
from pytorch_lightning.cli import instantiate_module

from lostcities_cfr.agents import Agent, expect_arguments, register_agent_kind
from lostcities_cfr.agents.specs import BEST_HELP, BEST_USAGE, CKPT_HELP, CKPT_USAGE
from lostcities_cfr.errors import AgentSpecError, CheckpointError
from lostcities_cfr.evaluation.arena import describe_rules, plays_rules
from lostcities_cfr.game import Rules
from lostcities_cfr.game.protocol import Game

BEST_AGENT = Path(__file__).resolve().parent.parent / "pretrained" / "best.pt"
MODEL_CLASS_KEY = "model_class"
# Checkpoint entries only a resumed fit uses: Lightning's, and the one a model class names
# in its ``training_state_key`` (its reservoirs, pool, generators...).
RESUME_ONLY = frozenset({"optimizer_states", "lr_schedulers", "loops", "callbacks"})
DEFAULT_MODEL_CLASS = "lostcities_cfr.training.module.DeepCFR"
# Importing a module runs its code, so a class path read from a file must name one of these
# or be allowed (allow_class_path, CLASS_PATHS_VARIABLE).
SAFE_CLASS_PATH_PREFIXES = ("lostcities_cfr.", "torch.")
CLASS_PATHS_VARIABLE = "LOSTCITIES_CFR_CLASS_PATHS"
_ALLOWED_CLASS_PATHS: set[str] = set()

_LOADABLE: dict[str, type[pl.LightningModule] | None] = {
    DEFAULT_MODEL_CLASS: None,
    "lostcities_cfr.baselines.ppo.PPO": None,
    "lostcities_cfr.baselines.expert_iteration.ExpertIteration": None,
}
"""Allow-listed model classes by class path; ``None`` until first imported."""


def class_path(cls: type) -> str:
    """``module.QualName`` of a class, as ``model_class`` and ``class_path`` spell it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def register_model_class(model_class: type[pl.LightningModule] | str) -> None:
    """Allow checkpoints whose ``model_class`` names this class (or class path) to load.

    A class path is imported only when such a checkpoint is loaded, so a package can list
    its models without importing them.
    """
    if isinstance(model_class, str):
        _LOADABLE.setdefault(model_class, None)
    else:
        _LOADABLE[class_path(model_class)] = model_class


def allow_class_path(cls: type | str) -> None:
    """Let checkpoints whose hyperparameters name this class (or class path) load: a sampler
    or network written outside this package.

    Loading such a checkpoint imports the class's module, which runs its code: allow only
    classes of modules you trust. From the command line, name them in the environment
    variable ``LOSTCITIES_CFR_CLASS_PATHS`` (comma-separated) instead.
    """
    _ALLOWED_CLASS_PATHS.add(cls if isinstance(cls, str) else class_path(cls))


def allowed_class_paths() -> set[str]:
    """The class paths outside this package and torch that checkpoints may name."""
    from_environment = os.environ.get(CLASS_PATHS_VARIABLE, "").split(",")
    return _ALLOWED_CLASS_PATHS | {path.strip() for path in from_environment if path.strip()}


def loadable_model_classes() -> list[str]:
    """The class paths :func:`load_model` builds."""
    return sorted(_LOADABLE)


def plain_data(value: Any) -> Any:
    """``value`` as what ``torch.load(weights_only=True)`` reads back: plain data and tensors.

    Numbers and strings become their plain type (jsonargparse hands over ``PositiveInt``s);
    dataclasses (``Rules``, ``NetworkConfig``) become dicts of their fields; a class (a
    network's) becomes ``{"class_path"}`` and a ``functools.partial`` of one adds its keyword
    arguments as ``init_args``; any other object becomes ``{"class_path", "init_args"}``
    (LightningCLI's form) from its constructor's parameters, which it must keep as attributes
    of the same names (the samplers do).
    """
    if value is None or isinstance(value, torch.Tensor):
        return value
    for plain in (bool, int, float, str):  # bool first: a bool is an int
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, list | tuple):
        return [plain_data(item) for item in value]
    if isinstance(value, dict):
        return {key: plain_data(item) for key, item in value.items()}
    # A game is named by its class (a field-less dataclass would become {}, read back as
    # Lost Cities' default rules).
    if dataclasses.is_dataclass(value) and not isinstance(value, type | Game):
        return plain_data(dataclasses.asdict(value))
    if isinstance(value, type):
        return {"class_path": class_path(value)}
    if isinstance(value, functools.partial) and isinstance(value.func, type) and not value.args:
        return {"class_path": class_path(value.func), "init_args": plain_data(value.keywords)}
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    signature = inspect.signature(type(value)).parameters.values()
    parameters = [p.name for p in signature if p.kind not in variadic]
    missing = [name for name in parameters if not hasattr(value, name)]
    if missing:
        raise CheckpointError(
            f"{type(value).__name__} cannot be saved as plain data: it keeps no attribute "
            f"{missing[0]!r} for its constructor argument of that name"
        )
    return {
        "class_path": class_path(type(value)),
        "init_args": {name: plain_data(getattr(value, name)) for name in parameters},
    }


class StreamingCheckpointIO(TorchCheckpointIO):
    """Lightning's ``TorchCheckpointIO``, writing a checkpoint straight into its file.

    Lightning's serialises the whole checkpoint into memory before writing it, which for a
    run with millions of reservoir rows doubles their memory while it saves
    (``docs/performance.md``). This one ``torch.save``s into a hidden file beside the target
    and renames it over the target once complete, so a save that is killed leaves the
    previous checkpoint whole and no truncated one. Loading is Lightning's.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None or "://" in str(path):  # remote storage: Lightning's
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        torch.save(checkpoint, partial)
        os.replace(partial, path)


def read_checkpoint(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """The checkpoint at ``path``, read with ``torch.load(weights_only=True)`` onto the CPU.

    ``mmap`` maps tensors instead of reading them (to look at a big checkpoint's settings).

    Raises:
        CheckpointError: no such file, a file the safe loader refuses, or one that is not a
            readable checkpoint (truncated, corrupted); the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        dangling = " (a link to a missing file)" if path.is_symlink() else ""
        raise CheckpointError(f"checkpoint {path}: no such file{dangling}")
    try:
        checkpoint = torch.load(
            path, map_location="cpu", weights_only=True, mmap=mmap and zipfile.is_zipfile(path)
        )
    except Exception as error:  # torch raises many kinds for a bad file; each is one answer
        text = str(error).strip()
        # The safe unpickler names what it refused: a global (a function or class to call)
        # or an object it cannot build. Anything else is a damaged or foreign file.
        reason = text.split("WeightsUnpickler error:", 1)[-1].strip()
        reason = reason.splitlines()[0].split(" was not", 1)[0] if reason else ""
        if "WeightsUnpickler error" in text and ("GLOBAL" in reason or "Can only" in reason):
            raise CheckpointError(
                f"checkpoint {path}: refused: it holds more than tensors and plain data "
                f"({reason}), and loading that could run code; checkpoints written by fit "
                "hold tensors and plain data only"
            ) from None
        if "WeightsUnpickler error" not in text:
            reason = text.splitlines()[0].split(". ")[0] if text else ""
        raise CheckpointError(
            f"checkpoint {path}: not a readable checkpoint, truncated or corrupted "
            f"({type(error).__name__}: {reason[:160]})"
        ) from None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise CheckpointError(
            f"checkpoint {path}: holds no state_dict; expected a checkpoint written by fit"
        )
    return checkpoint


def model_class_of(checkpoint: dict[str, Any], path: str | Path) -> type[pl.LightningModule]:
    """The allow-listed class named by ``checkpoint[model_class]`` (DeepCFR when absent)."""
    name = checkpoint.get(MODEL_CLASS_KEY, DEFAULT_MODEL_CLASS)
    if not isinstance(name, str) or name not in _LOADABLE:
        raise CheckpointError(
            f"checkpoint {path}: {MODEL_CLASS_KEY}={name!r} is not a loadable model class; "
            f"expected one of {loadable_model_classes()} (register_model_class adds one)"
        )
    cls = _LOADABLE[name]
    if cls is None:
        module, _, attribute = name.rpartition(".")
        cls = getattr(import_module(module), attribute)
        _LOADABLE[name] = cls
    return cls


def hyperparameters(
    checkpoint: dict[str, Any], path: str | Path, allowed: Collection[str] = ()
) -> dict[str, Any]:
    """The checkpoint's model arguments, with Lightning's bookkeeping keys dropped.

    Args:
        checkpoint: as :func:`read_checkpoint` returns it.
        path: its file, for messages.
        allowed: class paths allowed besides this package's, torch's and
            :func:`allowed_class_paths` (``fit --ckpt_path``: those of its own config).

    Raises:
        CheckpointError: a class path among them that is not allowed (names it and the way
            to allow it).
    """
    hparams = {
        key: value
        for key, value in checkpoint.get("hyper_parameters", {}).items()
        if key not in ("_instantiator", "_class_path")
    }
    allowed = {*allowed, *allowed_class_paths()}
    for found in class_paths(hparams):
        if not isinstance(found, str) or not (
            found.startswith(SAFE_CLASS_PATH_PREFIXES) or found in allowed
        ):
            raise CheckpointError(
                f"checkpoint {path}: class_path={found!r} in its hyperparameters lies outside "
                f"{', '.join(p.rstrip('.') for p in SAFE_CLASS_PATH_PREFIXES)}; refused: "
                "loading it would import its module. If you trust that module, allow it with "
                f"allow_class_path({found!r}) or {CLASS_PATHS_VARIABLE}={found}"
            )
    return hparams


def class_paths(value: Any) -> list[Any]:
    """Every ``class_path`` in nested plain data (a config's or hyperparameters')."""
    if isinstance(value, dict):
        found = [value["class_path"]] if "class_path" in value else []
        return found + [path for item in value.values() for path in class_paths(item)]
    if isinstance(value, list):
        return [path for item in value for path in class_paths(item)]
    return []


def load_model(path: str | Path, rules: Rules | None = None) -> pl.LightningModule:
    """The model saved at ``path``, on the CPU, in eval mode (never its training buffers).

    Args:
        path: a checkpoint written by ``fit``.
        rules: the rules it is meant to play; rules of other features or actions are refused
            with both named.

    Raises:
        CheckpointError: the file cannot be read safely, names no loadable class, or holds
            weights that do not fit its own rules or ``rules`` (names the file).
    """
    checkpoint = read_checkpoint(path)
    cls = model_class_of(checkpoint, path)
    try:
        # In a fresh context: while LightningCLI builds a model, every save_hyperparameters
        # called gets that model's arguments, so a checkpoint loaded then (a base, an
        # opponent) would take them as its own instead of its saved ones.
        model = contextvars.Context().run(
            instantiate_module, cls, hyperparameters(checkpoint, path)
        )
    # jsonargparse checks the arguments against the signature (ArgumentError); the
    # constructor checks their values (ConfigError is a ValueError)
    except (ArgumentError, TypeError, ValueError) as error:
        if isinstance(error, CheckpointError):
            raise
        cause = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise CheckpointError(
            f"checkpoint {path}: its hyperparameters do not build a {cls.__name__} ({cause})"
        ) from None
    own_rules = getattr(model, "rules", None)
    if rules is not None and own_rules is not None and not plays_rules(own_rules, rules):
        raise CheckpointError(
            f"checkpoint {path} plays {describe_rules(own_rules)}; expected {describe_rules(rules)}"
        )
    # What a model plays may live beside its state dict (DeepCFR's stored iterations, the
    # sdcfr policy): its own hook restores it, as Lightning's loading does. The state only
    # a resume needs (optimizers, reservoirs) stays out, so an agent does not hold it.
    resume_only = RESUME_ONLY | {getattr(cls, "training_state_key", None)}
    model.on_load_checkpoint({k: v for k, v in checkpoint.items() if k not in resume_only})
    try:
        model.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as error:
        details = [line.strip() for line in str(error).splitlines()[1:] if line.strip()]
        raise CheckpointError(
            f"checkpoint {path}: its weights do not fit the {cls.__name__} of "
            f"{describe_rules(own_rules) if own_rules else 'its hyperparameters'} "
            f"({details[0] if details else str(error)})"
        ) from None
    check_finite_weights(checkpoint, path)
    return model.eval()


def networks_only(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """What :func:`load_model` needs of a training checkpoint, and nothing else.

    The model class, its arguments and its ``state_dict`` (the networks), plus the iteration
    it was saved after; no optimizer state, generators, snapshot pool or reservoirs, so a
    PPO checkpoint of 128x2 networks shrinks to a few hundred KB.
    """
    return {
        MODEL_CLASS_KEY: checkpoint.get(MODEL_CLASS_KEY, DEFAULT_MODEL_CLASS),
        "hyper_parameters": checkpoint.get("hyper_parameters", {}),
        "state_dict": checkpoint["state_dict"],
        "iteration": trained_iterations(checkpoint),
    }


def trained_iterations(checkpoint: dict[str, Any]) -> int:
    """The iterations (Lightning epochs) whose training had ended when ``checkpoint`` was saved.

    Read from Lightning's loop state, which every checkpoint of ``fit`` holds: its ``epoch``
    alone is ambiguous, since a checkpoint saved at an iteration's end holds the iteration's
    0-based epoch and one saved when ``fit`` ends holds the count of iterations. Files without
    the loop state (:func:`networks_only`'s) keep the count as ``iteration``.
    """
    progress = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {})
    if "current" in progress:
        return int(progress["current"]["processed"])
    if "iteration" in checkpoint:
        return int(checkpoint["iteration"])
    return checkpoint.get("epoch", -1) + 1  # an epoch-end checkpoint without loop state


def cut_iteration(checkpoint: dict[str, Any]) -> bool:
    """Whether ``checkpoint`` holds networks in the middle of an iteration's training: saved
    after its updates began and before they ended (a run interrupted then). A run
    interrupted in its traversal holds the last whole iteration's networks."""
    progress = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {})
    current = progress.get("current", {})
    return current.get("started", 0) > current.get("processed", 0)


def check_finite_weights(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint whose weights hold NaN or infinite values, naming the first."""
    for name, tensor in checkpoint["state_dict"].items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise CheckpointError(
                f"checkpoint {path}: weight {name} holds NaN or infinite values (a corrupted "
                "file or a diverged run)"
            )


def load_agent(
    path: str | Path,
    policy: str | None = None,
    greedy: bool = False,
    seed: int | None = None,
    rules: Rules | None = None,
) -> Agent:
    """The agent playing a checkpoint's ``policy`` (DeepCFR: ``"average"`` or ``"current"``;
    PPO: ``"policy"``).

    The agent's ``rules`` are the checkpoint's, so the arena and ``play`` refuse it in a game
    of other rules before the first move.

    Args:
        path: a checkpoint written by ``fit`` (e.g. ``runs/quickstart/checkpoints/last.ckpt``).
        policy: for DeepCFR, ``"average"`` (the strategy network, Deep CFR's output),
            ``"current"`` (regret matching on the advantage networks) or ``"sdcfr"`` (stored
            iterations); for PPO, ``"policy"``; None: the policy the run deploys (DeepCFR's
            ``deploy``, PPO's policy network).
        greedy: play the most probable action instead of sampling.
        seed: seeds sampling.
        rules: the rules it is meant to play (see :func:`load_model`).
    """
    model = load_model(path, rules)
    game = getattr(model, "game", None)
    if getattr(model, "rules", None) is None and game is not None:
        raise CheckpointError(
            f"checkpoint {path} plays {game.name}: agents of the arena, play, serve and search "
            "play Lost Cities (measure it with `python -m lostcities_cfr nashconv`)"
        )
    if policy is not None and policy not in model.policies:
        raise AgentSpecError(
            f"checkpoint {path}: a {type(model).__name__} plays {list(model.policies)}, "
            f"not {policy!r}"
        )
    agent = model.agent(policy, greedy=greedy, seed=seed)
    agent.rules = model.rules
    # the value network a search over this agent cuts its rollouts with (search:ckpt:PATH)
    agent.state_value = model.state_value() if hasattr(model, "state_value") else None
    return agent


def peel_flags(args: Sequence[str], flags: Collection[str]) -> tuple[str, list[str]]:
    """A checkpoint spec's ``PATH[:flag...]`` split at ':' (``args``) into the path and the
    ``flags`` that end it. PATH may itself hold ':' (a Windows drive): flags are peeled off
    the end only."""
    end = len(args)
    while end > 1 and args[end - 1] in flags:
        end -= 1
    return ":".join(args[:end]), list(args[end:])


def checkpoint_agent(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    """The ``ckpt`` agent kind's factory: ``PATH[:average|:current|:sdcfr][:greedy]`` split at ':'.

    Raises:
        AgentSpecError: no path, both policies, an option, or no file at the path.
    """
    usage = CKPT_USAGE
    policies = {"average", "current", "sdcfr"}
    flags = {*policies, "greedy"}
    path, peeled = peel_flags(args, flags)
    chosen = set(peeled)
    expect_arguments([], options, 0, usage)
    if not path:
        raise AgentSpecError(f"a checkpoint spec needs a path; usage: {usage}")
    if len(chosen & policies) > 1:
        raise AgentSpecError("choose one of :average, :current and :sdcfr, not several")
    if not Path(path).is_file():
        raise AgentSpecError(f"no checkpoint file at {path!r}")
    return load_agent(
        path,
        policy=next(iter(chosen & policies), None),
        greedy="greedy" in chosen,
        seed=seed,
    )


def best_agent(args: list[str], options: dict[str, str], seed: int | None) -> Agent:
    """The ``best`` agent kind's factory: the shipped checkpoint, ``:greedy`` optional.

    Raises:
        AgentSpecError: an argument other than ``greedy``, or an option.
    """
    expect_arguments([a for a in args if a != "greedy"], options, 0, BEST_USAGE)
    return load_agent(BEST_AGENT, greedy="greedy" in args, seed=seed)


register_agent_kind("ckpt", checkpoint_agent, CKPT_USAGE, CKPT_HELP)
register_agent_kind("best", best_agent, BEST_USAGE, BEST_HELP)
