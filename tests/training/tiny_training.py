"""Tiny Deep CFR runs for the training tests: tiny rules, 32x2 networks, a few updates.

A run takes a couple of seconds on a CPU, on one thread. Runs log to CSV in ``tmp_path``
(never W&B) and show no progress bar. Also networks with known preferences and positions
where either player is to move, to check which network plays where. (A module of its own,
not ``conftest``, so test files import it by a name no other test folder uses.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytorch_lightning as pl
import torch
import yaml

from lostcities_cfr.agents import Agent, random_legal_actions
from lostcities_cfr.cfr.external_sampling import ExternalSampling
from lostcities_cfr.cfr.networks import NetworkConfig, PolicyMLP
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.training import DeepCFR

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


# ``ckpt:PATH`` suffixes and the (policy, greedy) each selects, flags in either order
CKPT_SUFFIXES = [
    ("", "average", False),
    (":average", "average", False),
    (":greedy", "average", True),
    (":current", "current", False),
    (":greedy:current", "current", True),
    (":current:greedy", "current", True),
]


def seeded_play_under_two_global_seeds(
    make_agent: Callable[[], Agent], batch: GameBatch
) -> torch.Tensor:
    """[B] actions of ``make_agent()`` on ``batch``, asserted equal when the agent is built
    and plays under two different global torch seeds: a seeded agent draws from its own
    generator only."""
    played = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        played.append(make_agent().act(batch))
    assert torch.equal(*played)
    return played[0]


def tiny_config(run_dir: Path, max_epochs: int = 3, **model: object) -> dict:
    """A whole LightningCLI config of a tiny run in ``run_dir``; ``model`` overrides fields."""
    return {
        "seed_everything": 7,
        "threads": 1,
        "trainer": {
            "max_epochs": max_epochs,
            "default_root_dir": str(run_dir),
            "logger": {  # in the run's folder, which fit gives it (loggers follow the run)
                "class_path": "lostcities_cfr.callbacks.IterationCSVLogger",
                "init_args": {"name": "csv"},
            },
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
        },
        "model": {**TINY_MODEL, **model},
    }


def cli_subprocess(
    config: Path, *overrides: str, callback: dict | list[dict] | None = None
) -> dict:
    """``subprocess`` arguments of ``python -m lostcities_cfr fit --config config ...``.

    The child imports this repository and the callbacks of ``run_probes`` (given as
    ``callback``, a class_path/init_args mapping or a list of them, appended to the run's
    callbacks).
    """
    args = [sys.executable, "-m", "lostcities_cfr", "fit", "--config", str(config), *overrides]
    callbacks = [] if callback is None else [callback] if isinstance(callback, dict) else callback
    for added in callbacks:
        args.append(
            f"--trainer.callbacks+={yaml.safe_dump(added, default_flow_style=True).strip()}"
        )
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    return {"args": args, "env": env}


@contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread for a run made outside a test function (a module-scoped fixture),
    where the suite's per-test thread fixture does not reach."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def tiny_model(**overrides: object) -> DeepCFR:
    """:data:`TINY_MODEL` built directly (external sampling, 32 walkers), ``overrides`` on top."""
    arguments = {
        **TINY_MODEL,
        "network": NetworkConfig(**TINY_MODEL["network"]),
        "sampler": ExternalSampling(walkers=32),
        **overrides,
    }
    return DeepCFR(**arguments)


def fit(
    model: DeepCFR, max_epochs: int, callbacks: Sequence[pl.Callback] = (), **trainer_args: object
) -> pl.Trainer:
    """``max_epochs`` iterations of ``model`` on the CPU (unless ``trainer_args`` name an
    accelerator): no logger, checkpoint or bar; ``trainer_args`` go to the Trainer
    (``precision``...)."""
    trainer_args.setdefault("accelerator", "cpu")
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        **trainer_args,
    )
    trainer.fit(model)
    return trainer


def answer_always(net: PolicyMLP, outputs: torch.Tensor) -> None:
    """Make ``net`` answer ``outputs`` [A] whatever its input: a known preference."""
    with torch.no_grad():
        net.head.weight.zero_()
        net.head.bias.copy_(outputs)


def preference(n_actions: int, lowest_first: bool) -> torch.Tensor:
    """[A] outputs, all negative and distinct: regret matching (which falls back to the
    highest advantage) and any arg-max play the lowest (or the highest) legal action id."""
    rising = torch.arange(n_actions, dtype=torch.float32) / n_actions  # [A] in [0, 1)
    return -1.0 - rising if lowest_first else -2.0 + rising


def lowest_and_highest_legal(batch: GameBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """[B] int64 each: the lowest and the highest legal action id of every game."""
    legal = batch.legal_mask().long()  # [B, A]
    A = legal.shape[1]
    return legal.argmax(1), A - 1 - legal.flip(1).argmax(1)


def positions(rules: Rules, per_depth: int = 16, seed: int = 0) -> GameBatch:
    """Unfinished games after 0 to 5 random decisions: both players to move, both decisions."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for depth in range(6):
        batch = GameBatch.new(rules, per_depth, seed=seed + depth)
        for _ in range(depth):
            batch.step(random_legal_actions(batch.legal_mask(), generator))
        batches.append(batch.select((~batch.done).nonzero().squeeze(1)))
    return GameBatch.cat(batches)
