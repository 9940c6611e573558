"""How exploitable a run's deployed policy is, measured by a small learned best response."""

from __future__ import annotations

import time

import pytorch_lightning as pl

from lostcities_cfr.arguments import NonNegativeInt, PositiveInt, checked
from lostcities_cfr.baselines.best_response import DEFAULT_NETWORK, measure, train_best_response
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.evaluation.arena import EvaluationResult
from lostcities_cfr.training.evaluation import check_duplicate_games
from lostcities_cfr.training.metrics import exploit_metrics


class BestResponseProbe(pl.Callback):
    """Trains a small best response to the run's deployed policy every few iterations.

    Acts at the end of every ``every_n_iterations``-th iteration (and of the last one,
    ``trainer.max_epochs``): freezes the policy the model deploys (``agent(None)``: DeepCFR's
    ``deploy``, PPO's policy network), trains PPO against it alone for ``iterations`` PPO
    iterations (:func:`~lostcities_cfr.baselines.best_response.train_best_response`), then
    plays the two in ``games`` duplicate games on held-out deals. The run's own training waits
    meanwhile. Only global rank zero plays.

    The figure is a lower bound on the policy's exploitability, and a small budget makes it a
    loose one: read the curve's trend, and measure a final policy with ``python -m
    lostcities_cfr exploit`` (``docs/exploitability.md``).

    Logs ``exploit/score_diff`` (points per game the best response wins, the bound) with
    ``_ci_low``/``_ci_high`` (95%), ``exploit/win_rate`` with its Wilson interval, and
    ``exploit/seconds`` (the probe's wall time).

    Args:
        every_n_iterations: probe when the iteration is a multiple of this.
        iterations: PPO iterations of each best response.
        games_per_rollout: its training rounds per iteration.
        clone_iterations: of those, iterations cloning the policy first.
        games: measurement games (duplicate: odd counts round up).
        network: the best response's networks.
        seed: seeds the best response; the same at every probe, so that probes differ
            only by the policy they answer.
        probe_last: also probe at the run's last iteration.
    """

    @checked
    def __init__(
        self,
        every_n_iterations: PositiveInt = 50,
        iterations: PositiveInt = 40,
        games_per_rollout: PositiveInt = 256,
        clone_iterations: NonNegativeInt = 0,
        games: PositiveInt = 200,
        network: NetworkConfig = DEFAULT_NETWORK,
        seed: int = 0,
        probe_last: bool = True,
    ) -> None:
        if games_per_rollout < 2:
            raise ConfigError(
                f"BestResponseProbe games_per_rollout={games_per_rollout}; expected at least 2"
            )
        if clone_iterations >= iterations:
            raise ConfigError(
                f"BestResponseProbe clone_iterations={clone_iterations}; expected fewer than "
                f"iterations={iterations}, so that some train against the policy"
            )
        self.every_n_iterations = every_n_iterations
        self.iterations = iterations
        self.games_per_rollout = games_per_rollout
        self.clone_iterations = clone_iterations
        self.games = games
        self.network = network
        self.seed = seed
        self.probe_last = probe_last

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        check_duplicate_games(pl_module, "BestResponseProbe")  # a learned Lost Cities player

    def should_probe(self, trainer: pl.Trainer, iteration: int) -> bool:
        """Whether ``iteration`` is one this callback probes."""
        last = self.probe_last and trainer.max_epochs is not None
        return iteration % self.every_n_iterations == 0 or (
            last and iteration == trainer.max_epochs
        )

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.should_probe(trainer, pl_module.iteration):
            return
        metrics: dict[str, float] = {}
        if trainer.is_global_zero:
            start = time.perf_counter()
            rounds = self.probe(pl_module).rounds
            metrics = exploit_metrics(rounds, time.perf_counter() - start)
        for name, value in metrics.items():
            pl_module.log(name, value, on_step=False, on_epoch=True, rank_zero_only=True)

    def probe(self, pl_module: pl.LightningModule) -> EvaluationResult:
        """Train a best response to ``pl_module``'s deployed policy now; its measurement."""
        agent = pl_module.agent(None, seed=self.seed + 4)
        agent.rules = pl_module.rules
        best_response = train_best_response(
            agent,
            pl_module.rules,
            iterations=self.iterations,
            seed=self.seed,
            network=self.network,
            games_per_rollout=self.games_per_rollout,
            clone_iterations=self.clone_iterations,
            check_every=0,
            accelerator="gpu" if pl_module.device.type == "cuda" else "cpu",
        )
        return measure(best_response, agent, self.games, device=pl_module.device)
