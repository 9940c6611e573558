"""What runs in a trial's process of ``openspiel_side_by_side.py`` (its ``trial`` entry hands
over to :func:`run_trial`): one (contestant, seed) trained on the training clock and evaluated
on it. :class:`TrainingClock` and :func:`train_loop` are the clock, its evaluation points and
budget; OpenSpiel's Deep CFR and CFR+ run on it here, writing their evaluations' rows to the
trial's ``metrics.csv``; ours is a ``fit`` of its config (:func:`fit_argv`) whose
``NashConvClock`` callback keeps the same clock and logs the same columns. What is measured,
the clock and the fairness choices: that script's docstring.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps.run_metrics import METRICS_FILE

CONTESTANTS = ("openspiel", "ours", "ours_adapter", "cfr_plus")
FITTED = ("ours", "ours_adapter")  # the contestants that run a fit of --config
# OpenSpiel's example settings (open_spiel/python/examples/deep_cfr_pytorch.py).
OPENSPIEL_EXAMPLE: dict[str, Any] = {
    "policy_network_layers": (64,),
    "advantage_network_layers": (64,),
    "num_traversals": 375,
    "reinitialize_advantage_networks": True,
    "learning_rate": 1e-3,
    "batch_size_advantage": 256,
    "batch_size_strategy": 256,
    "memory_capacity": 100_000,
    "policy_network_train_steps": 2500,
    "advantage_network_train_steps": 375,
}
CFR_PLUS_ITERATIONS = 100
# CFR+ is evaluated by iterations (the whole run takes seconds): every one up to 5, then every 5.
CFR_PLUS_EVALS = frozenset([*range(1, 5), *range(5, CFR_PLUS_ITERATIONS + 1, 5)])
ADAPTER = "lostcities_cfr.game.openspiel_adapter.OpenSpielGame"
CSV_LOGGER = "lostcities_cfr.callbacks.IterationCSVLogger"
# How Lightning, in a trial's process, imports our runs' callback: this file as a module
# (sys.path holds its folder, as `python scripts/...` has it), and the callback's name in it.
MODULE = Path(__file__).stem
CALLBACK = "NashConvClock"
# The columns of an evaluation in its metrics.csv (those ``report`` reads: the sweep's
# metric, and the clock its curves against seconds take).
ITERATION, NASH_CONV, SECONDS = "iteration", "nash_conv", "time/elapsed_s"

Record = Callable[[dict[str, float]], None]  # takes an evaluation's row


class TrainingClock:
    """One run's training clock, evaluation points and budget (``openspiel_side_by_side.py``'s
    docstring): wall-clock since :meth:`start` less the evaluations' time, during which it is
    paused.

    Args:
        budget_s: the run ends at the first iteration's end at or past this training clock.
        eval_every_s: evaluate at the first iteration's end past each multiple of this.
        eval_iterations: also evaluate at these iterations.
        max_iterations: the run also ends at this iteration (None: no limit).
    """

    def __init__(
        self,
        budget_s: float,
        eval_every_s: float,
        eval_iterations: Collection[int] = (),
        max_iterations: int | None = None,
    ) -> None:
        self.budget_s = budget_s
        self.eval_every_s = eval_every_s
        self.eval_iterations = eval_iterations
        self.max_iterations = max_iterations
        self._start = self._paused = 0.0
        self._next_eval = eval_every_s

    def start(self) -> None:
        self._start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._start - self._paused

    def end_iteration(self, iteration: int, measure: Callable[[], float], record: Record) -> bool:
        """At an iteration's end: if an evaluation is due, ``measure()`` the NashConv and
        ``record`` its row (``iteration``, ``nash_conv``, ``time/elapsed_s``), with the clock
        paused; whether the run is over."""
        seconds = self.seconds
        over = seconds >= self.budget_s or iteration == self.max_iterations
        if (
            over
            or iteration == 1
            or iteration in self.eval_iterations
            or seconds >= self._next_eval
        ):
            paused_at = time.perf_counter()
            record({ITERATION: iteration, NASH_CONV: float(measure()), SECONDS: seconds})
            self._paused += time.perf_counter() - paused_at
            while self._next_eval <= seconds:
                self._next_eval += self.eval_every_s
        return over


def train_loop(
    clock: TrainingClock, iterate: Callable[[], None], measure: Callable[[], float], record: Record
) -> None:
    """Run ``iterate`` until ``clock`` says the run is over, evaluating as it says."""
    clock.start()
    iteration = 0
    while True:
        iterate()
        iteration += 1
        if clock.end_iteration(iteration, measure, record):
            return


# ---- the contestants --------------------------------------------------------------------------
def run_openspiel(args: argparse.Namespace, record: Record) -> None:
    """OpenSpiel's ``DeepCFRSolver``, iterated as its ``solve()`` is, its average policy
    trained afresh at each evaluation (that script's docstring) and measured by OpenSpiel."""
    import pyspiel
    from open_spiel.python import policy
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.pytorch.deep_cfr import DeepCFRSolver

    game = pyspiel.load_game(args.game)
    solver = DeepCFRSolver(game, seed=args.seed, **OPENSPIEL_EXAMPLE)

    def iterate() -> None:  # the body of DeepCFRSolver.solve()'s loop
        for player in range(game.num_players()):
            for _ in range(solver._num_traversals):
                solver._traverse_game_tree(solver._root_node, player)
            if solver._reinitialize_advantage_networks:
                solver._reinitialize_advantage_network(player)
            solver._learn_advantage_network(player)
        solver._iteration += 1

    def measure() -> float:
        # What the example does after solve(): train the strategy network, then measure;
        # from a fresh network each time, with the training's random state put back after.
        states = np.random.get_state(), torch.get_rng_state()
        solver._reinitialize_policy_network()
        solver._learn_strategy_network()
        average = policy.tabular_policy_from_callable(game, solver.action_probabilities)
        value = exploitability.nash_conv(game, average)
        np.random.set_state(states[0])
        torch.set_rng_state(states[1])
        return value

    train_loop(TrainingClock(args.seconds, args.eval_every), iterate, measure, record)


def run_cfr_plus(args: argparse.Namespace, record: Record) -> None:
    """OpenSpiel's tabular CFR+ (Python), its average policy measured by OpenSpiel."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.algorithms.cfr import CFRPlusSolver

    game = pyspiel.load_game(args.game)
    solver = CFRPlusSolver(game)
    train_loop(
        TrainingClock(args.seconds, math.inf, CFR_PLUS_EVALS, CFR_PLUS_ITERATIONS),
        solver.evaluate_and_update_policy,
        lambda: exploitability.nash_conv(game, solver.average_policy()),
        record,
    )


def nash_conv_clock_class() -> type:
    """:class:`NashConvClock`, defined on first use (module ``__getattr__``): it subclasses
    Lightning's ``Callback``, and Lightning takes seconds to import, which only our runs'
    trials need (the package defers ``DeepCFR`` for the same reason)."""
    import pytorch_lightning as pl

    from lostcities_cfr.cfr.exploitability import exact_nash_conv

    class NashConvClock(pl.Callback):
        """Our side's clock in a ``fit``: at each iteration's end, the exact NashConv of the
        model's deployed policy when an evaluation is due (clock paused), logged with the
        clock's seconds (``nash_conv``, ``time/elapsed_s``) to the run's loggers, and the
        stop once the budget is spent. ``game``: the game the run must train (the config's,
        checked)."""

        def __init__(self, game: str, budget_s: float, eval_every_s: float) -> None:
            self.game = game
            self.clock = TrainingClock(budget_s, eval_every_s)

        def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            trained = pl_module.game.name
            if trained != self.game:
                raise ConfigError(f"the config trains {trained}, not --game {self.game}")
            self.clock.start()

        def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            def measure() -> float:
                return exact_nash_conv(pl_module.game, pl_module.exact_policy())

            def record(row: dict[str, float]) -> None:  # the model logs the iteration
                del row[ITERATION]
                pl_module.log_dict(row, on_step=False, on_epoch=True)

            if self.clock.end_iteration(pl_module.iteration, measure, record):
                trainer.should_stop = True

    # a top-level name, as Lightning's saved config.yaml and pickle refer to it
    NashConvClock.__qualname__ = CALLBACK
    return NashConvClock


def __getattr__(name: str) -> Any:
    if name == CALLBACK:
        globals()[name] = nash_conv_clock_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fit_argv(args: argparse.Namespace) -> list[str]:
    """``fit``'s arguments for the trial ``args``: its config and the overrides of
    ``openspiel_side_by_side.py``'s docstring (the adapter's rules for ``ours_adapter``)."""
    clock = {
        "class_path": f"{MODULE}.{CALLBACK}",
        "init_args": {"game": args.game, "budget_s": args.seconds, "eval_every_s": args.eval_every},
    }
    argv = [
        "--config",
        args.config,
        f"--threads={args.threads}",
        f"--seed_everything={args.seed}",
        f"--trainer.logger={json.dumps({'class_path': CSV_LOGGER})}",  # no W&B
        f"--trainer.default_root_dir={args.run_dir}",
        "--trainer.max_epochs=-1",  # the budget ends the run
        "--trainer.max_time=null",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        "--checkpoint.every_n_epochs=0",  # no checkpoint but the networks at the end
        "--checkpoint.save_at_end=false",
        "--model.exploitability_every=0",  # NashConvClock measures, off the clock
        # the clock alone: a config's progress bar or PhaseTimer (which logs time/elapsed_s
        # on the wall clock) would not let it run or would write over its seconds
        f"--trainer.callbacks={json.dumps([clock])}",
    ]
    if args.contestant == "ours_adapter":
        rules = {"class_path": ADAPTER, "init_args": {"name": args.game}}
        argv.append(f"--model.rules={json.dumps(rules)}")
    return argv


def run_trial(argv: list[str], prog: str) -> None:
    """The script's ``trial`` entry (``prog``, its name in errors): one (contestant, seed) in
    this process. Ours is a ``fit`` of :func:`fit_argv`; OpenSpiel's solvers write their
    evaluations' rows to ``RUN_DIR/metrics.csv`` as they come, for the sweep to follow."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--contestant", choices=CONTESTANTS, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--game", required=True)
    parser.add_argument("--seconds", type=float, required=True, help="training clock")
    parser.add_argument("--eval-every", type=float, required=True)
    parser.add_argument("--config", required=True, help="ours: the fit config")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.contestant in FITTED:
        from lostcities_cfr.commands import fit as fit_cli

        fit_cli.run("fit", fit_argv(args))
        return
    args.run_dir.mkdir(parents=True, exist_ok=True)
    with (args.run_dir / METRICS_FILE).open("w", newline="") as file:
        writer = csv.DictWriter(file, [ITERATION, NASH_CONV, SECONDS])
        writer.writeheader()

        def record(row: dict[str, float]) -> None:
            writer.writerow(row)
            file.flush()

        {"openspiel": run_openspiel, "cfr_plus": run_cfr_plus}[args.contestant](args, record)
