"""Arena evaluation of a model's policies every few iterations, while training runs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import WandbLogger

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training.evaluation import check_policies, evaluate_policy, policy_label
from lostcities_cfr.training.metrics import ITERATION, eval_metrics

TABLE_KEY = "eval/results"
TABLE_COLUMNS = [
    ITERATION,
    "policy",
    "opponent",
    "games",
    "win_rate",
    "win_rate_ci_low",
    "win_rate_ci_high",
    "draw_rate",
    "score_diff",
    "score_diff_ci_low",
    "score_diff_ci_high",
    "seconds",
]


class PeriodicEvaluation(pl.Callback):
    """Plays the model's policies against fixed opponents in the arena during training.

    Acts at the end of every ``every_n_iterations``-th CFR iteration and of the
    last one (``trainer.max_epochs``): for each policy and each opponent it runs
    :func:`lostcities_cfr.evaluation.arena.evaluate` (duplicate games, all of them batched)
    on the same deals every time (``seed``), so that a curve compares
    iterations on equal cards. Only global rank zero plays; the networks are
    the same on every rank.

    Logs to every logger, at the evaluated iteration:

    - ``eval/<policy>/<opponent>/win_rate``, ``..._ci_low``, ``..._ci_high``
      (Wilson 95% interval) and ``eval/<policy>/<opponent>/score_diff`` with its
      ``_ci_low``/``_ci_high`` (Student-t over deals);
    - ``eval/seconds``: this evaluation's wall time, and ``eval/amortized_s``:
      all evaluation time so far divided by the iterations so far (its cost per
      iteration);

    and, to a :class:`~pytorch_lightning.loggers.WandbLogger`, the table
    ``eval/results`` with one row per (iteration, policy, opponent) so far.
    ``PhaseTimer`` reads :attr:`last_seconds` for ``time/eval_s``.

    ``"average"`` is the strategy network (the Deep CFR output policy);
    ``"current"`` is regret matching on the advantage networks, the policy
    being trained this iteration: the gap between the two shows how far the
    average network lags.

    Args:
        every_n_iterations: evaluate when the iteration is a multiple of this.
        games: games per (policy, opponent); odd counts round up (each deal is
            played from both seats).
        opponents: agent specs (``docs/agents.md``), e.g. ``random``,
            ``heuristic:cautious``, ``ckpt:PATH``.
        policies: which of the model's policies play (``DeepCFR``: ``average``,
            ``current``); None: every policy the model has. Checked at setup.
        greedy: the policies play their most probable action instead of sampling.
        seed: seeds the deals and both sides' sampling.
        evaluate_last: also evaluate at the run's last iteration.
    """

    @checked
    def __init__(
        self,
        every_n_iterations: PositiveInt = 10,
        games: PositiveInt = 100,
        opponents: Sequence[str] = ("random", "heuristic"),
        policies: Sequence[str] | None = None,
        greedy: bool = False,
        seed: int = 0,
        evaluate_last: bool = True,
    ) -> None:
        if not opponents:
            raise ConfigError("PeriodicEvaluation opponents=[]; name at least one agent spec")
        if policies is not None and not policies:
            raise ConfigError("PeriodicEvaluation policies=[]; name at least one, or null for all")
        self.every_n_iterations = every_n_iterations
        self.games = games
        self.opponents = list(opponents)
        self.policies = None if policies is None else list(policies)
        self.greedy = greedy
        self.seed = seed
        self.evaluate_last = evaluate_last
        self.total_seconds = 0.0
        self.rows: list[list[Any]] = []  # the W&B table, one row per (iteration, policy, opponent)
        self.last_iteration: int | None = None
        self.last_seconds = 0.0

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # A bad spec or policy fails here, before any traversal runs.
        check_policies(pl_module, self._policies(pl_module), "PeriodicEvaluation")
        for spec in self.opponents:
            agent_from_spec(spec)

    def should_evaluate(self, trainer: pl.Trainer, iteration: int) -> bool:
        """Whether ``iteration`` is one this callback evaluates."""
        last = self.evaluate_last and trainer.max_epochs is not None
        return iteration % self.every_n_iterations == 0 or (
            last and iteration == trainer.max_epochs
        )

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        iteration = pl_module.iteration
        if not self.should_evaluate(trainer, iteration):
            return
        metrics: dict[str, float] = {}
        if trainer.is_global_zero:
            metrics = self.evaluate_policies(pl_module, iteration)
            self.total_seconds += self.last_seconds
            metrics["eval/seconds"] = self.last_seconds
            metrics["eval/amortized_s"] = self.total_seconds / iteration
            self._log_table(trainer, iteration)
        for name, value in metrics.items():
            pl_module.log(name, value, on_step=False, on_epoch=True, rank_zero_only=True)

    def evaluate_policies(self, pl_module: pl.LightningModule, iteration: int) -> dict[str, float]:
        """Play every (policy, opponent) pair now; their metrics, keyed as logged.

        Also appends the results to the table and sets :attr:`last_seconds`.
        """
        start = time.perf_counter()
        metrics: dict[str, float] = {}
        for policy in self._policies(pl_module):
            for spec in self.opponents:
                result = evaluate_policy(
                    pl_module, policy, spec, self.games, seed=self.seed, greedy=self.greedy
                )
                metrics.update(eval_metrics(policy_label(policy, self.greedy), spec, result))
                rounds = result.rounds
                self.rows.append(
                    [
                        iteration,
                        policy_label(policy, self.greedy),
                        spec,
                        result.games,
                        rounds.win_rate,
                        *rounds.win_rate_ci,
                        rounds.draw_rate,
                        rounds.score_diff,
                        *rounds.score_diff_ci,
                        result.seconds,
                    ]
                )
        self.last_iteration = iteration
        self.last_seconds = time.perf_counter() - start
        return metrics

    def _policies(self, pl_module: pl.LightningModule) -> list[str]:
        return list(pl_module.policies) if self.policies is None else self.policies

    def _log_table(self, trainer: pl.Trainer, iteration: int) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                import wandb

                # The whole history every time: the latest table is the one W&B shows.
                table = wandb.Table(columns=TABLE_COLUMNS, data=[list(row) for row in self.rows])
                logger.log_metrics({TABLE_KEY: table, ITERATION: iteration})

    def state_dict(self) -> dict[str, Any]:
        return {"total_seconds": self.total_seconds, "rows": self.rows}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.total_seconds = state_dict["total_seconds"]
        self.rows = state_dict["rows"]
