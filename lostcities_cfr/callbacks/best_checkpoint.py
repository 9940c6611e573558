"""``best.ckpt``: the networks of the iteration whose deployed policy measured best."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities.rank_zero import rank_zero_info

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.callbacks.run_checkpoint import RunCheckpoint
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training.evaluation import (
    check_duplicate_games,
    deployed_policy,
    evaluate_policy,
    policy_label,
)
from lostcities_cfr.training.metrics import ITERATION, best_metrics


class BestCheckpoint(pl.Callback):
    """Keeps ``best.ckpt``: the networks whose *deployed* policy has measured best so far.

    Every ``every_n_iterations`` iterations, and once more when ``fit`` ends if the last
    iteration was not measured, the policy the model deploys (what ``ckpt:PATH`` plays:
    ``DeepCFR.deploy``, such as ``average:greedy``) plays ``games`` duplicate games against
    ``opponent``. The iteration with the highest lower end of the Wilson 95% interval of the
    win rate is kept, its networks saved weights-only (no reservoirs) in ``dirpath/filename``;
    a tie keeps the later iteration.

    Why not ``ModelCheckpoint`` on a ``PeriodicEvaluation`` metric: that figure is usually
    another policy's (a learning curve of the current strategy), on a few hundred games,
    and the maximum of many noisy figures picks the luckiest draw. Here the selection
    plays the very policy the file deploys, on enough games for differences of a few points
    to show, and on deals of its own (``seed``): the run's final evaluation plays other deals
    (its seed is the run's), so its figure is not the one that chose the file. The figure
    that chose it is biased upwards by the choice; report the final evaluation's, or
    evaluate the file on fresh deals.

    Logs, at each measured iteration, ``best/<policy>/<opponent>/win_rate`` (with
    ``_ci_low``, ``_ci_high``) and ``score_diff`` (with its interval), and
    ``best/iteration``: the iteration ``best.ckpt`` holds. Only global rank zero plays; every
    rank saves (a distributed save is collective).

    Args:
        every_n_iterations: measure when the iteration is a multiple of this.
        games: duplicate games per measurement (each deal played from both seats).
        opponent: agent spec of the opponent (``docs/agents.md``).
        seed: seeds the deals and both sides' sampling; keep it unlike the run's seed.
        dirpath: where ``best.ckpt`` goes; None: the run's checkpoint folder (that of
            ``fit``'s :class:`RunCheckpoint`).
        filename: the file's name.
    """

    @checked
    def __init__(
        self,
        every_n_iterations: PositiveInt = 10,
        games: PositiveInt = 1000,
        opponent: str = "heuristic:cautious",
        seed: int = 1,
        dirpath: str | None = None,
        filename: str = "best.ckpt",
    ) -> None:
        agent_from_spec(opponent)  # a bad spec fails while the config is read
        self.every_n_iterations = every_n_iterations
        self.games = games
        self.opponent = opponent
        self.seed = seed
        self.dirpath = dirpath
        self.filename = filename
        self.best_score: float | None = None  # the kept iteration's lower bound
        self.best_iteration: int | None = None
        self.measured_iteration: int | None = None
        # Read by PhaseTimer: this callback's evaluation counts in time/eval_s.
        self.last_iteration: int | None = None
        self.last_seconds = 0.0

    @property
    def path(self) -> Path:
        """Where ``best.ckpt`` is (once kept)."""
        return Path(self.dirpath or ".") / self.filename

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        check_duplicate_games(pl_module, "BestCheckpoint")  # it selects by duplicate games
        if self.dirpath is None:
            # The run's own checkpoint folder (fit's RunCheckpoint), not another
            # ModelCheckpoint's a config may add (weights along the curve, say).
            runs = [c for c in trainer.checkpoint_callbacks if isinstance(c, RunCheckpoint)]
            checkpoint = runs[0] if runs else trainer.checkpoint_callback
            if checkpoint is None or getattr(checkpoint, "dirpath", None) is None:
                raise ConfigError(
                    "BestCheckpoint dirpath=None needs the run's checkpoint folder "
                    "(a ModelCheckpoint); name a dirpath"
                )
            self.dirpath = str(checkpoint.dirpath)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        iteration = pl_module.iteration
        if iteration % self.every_n_iterations == 0:
            for name, value in self._measure(trainer, pl_module, iteration).items():
                pl_module.log(name, value, on_step=False, on_epoch=True, rank_zero_only=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning has counted the last epoch as completed: current_epoch is its iteration.
        iteration = pl_module.current_epoch
        if iteration == 0 or iteration == self.measured_iteration:
            return
        measured = self._measure(trainer, pl_module, iteration)
        if trainer.is_global_zero:  # self.log is not allowed here: the loggers themselves
            for logger in trainer.loggers:
                logger.log_metrics({ITERATION: float(iteration), **measured})

    def _measure(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, iteration: int
    ) -> dict[str, float]:
        """Play the deployed policy now; keep the networks if they beat the best so far.
        The metrics (rank zero's; empty on the other ranks)."""
        self.measured_iteration = iteration
        measured: dict[str, float] = {}
        score = None
        if trainer.is_global_zero:
            start = time.perf_counter()
            policy, greedy = deployed_policy(pl_module)
            result = evaluate_policy(
                pl_module, policy, self.opponent, self.games, seed=self.seed, greedy=greedy
            )
            score = result.rounds.win_rate_ci[0]
            self.last_seconds = time.perf_counter() - start
            self.last_iteration = iteration
            label = policy_label(policy, greedy)
            measured = best_metrics(label, self.opponent, result)
        score = trainer.strategy.broadcast(score)
        if self.best_score is None or score >= self.best_score:
            self.best_score, self.best_iteration = score, iteration
            trainer.save_checkpoint(self.path, weights_only=True)
            rank_zero_info(
                f"{self.path}: iteration {iteration}, win rate's lower 95% bound {score:.1%} "
                f"against {self.opponent} ({self.games} games, seed {self.seed})"
            )
        measured[f"best/{ITERATION}"] = float(self.best_iteration)
        return measured

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score, "best_iteration": self.best_iteration}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_score = state_dict["best_score"]
        self.best_iteration = state_dict["best_iteration"]
