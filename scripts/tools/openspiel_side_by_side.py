"""Our Deep CFR beside OpenSpiel's, on the same game, clock and thread: exact NashConv
against seconds of training and against iterations.

Four contestants train on ``--game`` (``leduc_poker``; ``kuhn_poker`` too) for ``--seconds``
of training clock each. Every (contestant, seed) is a trial of one sweep study in ``--out``
(a grid over ``contestant``, and ``--seeds``) that ``SweepRunner`` (``lostcities_cfr.sweeps``)
runs ``--jobs`` at a time, each in a process (this script's ``trial`` entry) and a folder
(``--out``/trials/N) of its own on one torch thread, logging its evaluations to its
``metrics.csv``: ``iteration``, ``nash_conv``, and ``time/elapsed_s`` (the training clock).

- ``openspiel``: OpenSpiel's PyTorch ``DeepCFRSolver`` with the settings of its example
  (``open_spiel/python/examples/deep_cfr_pytorch.py``: 64-unit networks, 375 traversals an
  iteration, 375 advantage and 2,500 strategy updates of 256 rows), iterated as its
  ``solve()`` does.
- ``ours``: :class:`~lostcities_cfr.training.module.DeepCFR` from ``--config`` (by default
  the game's best: ``configs/leduc_sdcfr.yaml``, ``configs/kuhn_sdcfr.yaml``) on our batched
  engine, run in the trial's process through ``python -m lostcities_cfr fit``'s own entry
  point (``commands/fit.py``'s ``run``) with overrides (:func:`fit_argv`): one thread, the
  seed, the trial's folder, a CSV logger alone, the run's own exploitability logging off,
  and this script's ``NashConvClock`` callback in place of the config's callbacks: it logs
  the evaluations. Any model with the game's ``exact_policy`` runs (PPO and MMD too).
- ``ours_adapter``: the same config with ``model.rules`` replaced by OpenSpiel's game behind
  :class:`~lostcities_cfr.game.openspiel_adapter.OpenSpielGame`: our algorithm over
  OpenSpiel's own states (same rules, slower), so that the engine's share of any difference
  between the first two shows.
- ``cfr_plus``: OpenSpiel's tabular ``CFRPlusSolver``, the floor, for at most
  ``CFR_PLUS_ITERATIONS`` iterations within the same budget.

**The clock.** A run's training clock is the wall-clock since its training started (after
building the solver, or Lightning's setup of the model) less the time of its evaluations,
during which it is paused. Every contestant is evaluated at the end of its first iteration,
at the end of the first iteration past each ``--eval-every`` seconds of training clock, and
at its last iteration, which is the first whose end finds the budget spent (CFR+: instead of
the ``--eval-every`` grid, at the iterations of ``CFR_PLUS_EVALS``). An iteration is each
algorithm's own: compare iterations within a contestant, seconds across them.

**What is measured.** Exact NashConv (``BR_0 + BR_1``, OpenSpiel's ``nash_conv``) of:
OpenSpiel's average policy (its strategy network's ``action_probabilities``), CFR+'s average
policy, and our model's deployed policy (``deploy``: the average strategy network unless the
config says otherwise), by our exact tree walk on our engine (which the tests hold equal to
OpenSpiel's) and by OpenSpiel's ``nash_conv`` behind the adapter.

**Fairness choices.**

- OpenSpiel's average policy exists only once its strategy network is trained, which its
  example does once, at the end. At each evaluation this script does the same: a fresh
  strategy network trained for 2,500 updates on the strategy reservoir, then measured;
  this training is kept OUT of OpenSpiel's clock. That favours OpenSpiel: our strategy
  network trains inside every iteration (``strategy_updates``), and that time counts.
  OpenSpiel's random state is restored after each evaluation, so that evaluations do not
  change its training.
- Our run writes no checkpoint until its end (OpenSpiel's writes none; a resumable
  checkpoint of every iteration would copy the reservoirs to disk each time); the final one
  (the trial's ``checkpoints/final.ckpt``) is written after the clock stops.
- An evaluation's row is logged with the clock paused; our runs' own per-iteration CSV row
  (losses, buffer rows) is on their clock, as any run's logging is.
- Process start, imports and building a solver or model are outside every clock.
- CFR+ is deterministic: it runs once, with the first seed (its other trials are not run).

A call with the same ``--out`` goes on with its study: finished trials never run again
(failed ones included: their error in the study, their output in their ``fit.log``), those
that were running run again; more seeds or contestants add trials; other settings (game,
budget, evaluation interval, config or its contents) are refused. Output in ``--out``
(``docs/figures/side_by_side/``), from the complete trials: ``side_by_side.json`` (every
point: contestant, seed, seconds, iteration, nash_conv; every run's totals; the settings and
the uniform policy's NashConv), ``nashconv_vs_seconds.png`` and ``nashconv_vs_iterations.png``
(median over seeds, min-max band, CFR+ dashed); a table of the median NashConv at 1, 2, 5,
10 and 15 minutes (those within the budget; the evaluation that closes each, the first at
or after it) is printed. ``python -m lostcities_cfr report OUT`` gives each contestant's
final NashConv over seeds with intervals. Runs compare fairly only on the same machine under
the same load: note both.

    python scripts/tools/openspiel_side_by_side.py [--game leduc_poker] [--seconds 900] [--seeds 3]
        [--jobs 2] [--eval-every 15] [--config configs/leduc_sdcfr.yaml]
        [--contestants openspiel,ours,ours_adapter,cfr_plus] [--out DIR] [--quick]
        [--beside DIR ...]

``--quick`` (the test's): 2 s a run, one seed, an evaluation every 0.5 s. ``--beside``
draws and tables the complete trials of other ``--out`` folders beside this call's, each
named by its folder: two configs of ours, run by two calls side by side, in one figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from optuna.trial import TrialState

from lostcities_cfr.commands.sweep import SWEEP_FILE
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.run_metrics import METRICS_FILE, find_metrics_files, read_metrics
from lostcities_cfr.sweeps.runner import TRIALS_DIR, SweepRunner
from lostcities_cfr.sweeps.spec import SEED, SweepSpec

CONTESTANTS = ("openspiel", "ours", "ours_adapter", "cfr_plus")
FITTED = ("ours", "ours_adapter")  # the contestants that run a fit of --config
LABELS = {
    "openspiel": "OpenSpiel Deep CFR (PyTorch, example settings)",
    "ours": "ours: DeepCFR on the batched engine",
    "ours_adapter": "ours over OpenSpiel's states (adapter)",
    "cfr_plus": "CFR+ (OpenSpiel, tabular)",
}
SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[2]
DEFAULT_CONFIGS = {
    "kuhn_poker": REPO / "configs/kuhn_sdcfr.yaml",
    "leduc_poker": REPO / "configs/leduc_sdcfr.yaml",
}
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
TABLE_MINUTES = (1, 2, 5, 10, 15)
ADAPTER = "lostcities_cfr.game.openspiel_adapter.OpenSpielGame"
CSV_LOGGER = "lostcities_cfr.callbacks.IterationCSVLogger"
# How Lightning, in a trial's process, imports our runs' callback: this file as a module
# (sys.path holds its folder, as `python scripts/...` has it), and the callback's name in it.
MODULE = SCRIPT.stem
CALLBACK = "NashConvClock"
# A trial's parameter, and the columns of an evaluation in its metrics.csv (those ``report``
# reads: the sweep's metric, and the clock its curves against seconds take).
CONTESTANT = "contestant"
ITERATION, NASH_CONV, SECONDS = "iteration", "nash_conv", "time/elapsed_s"

Record = Callable[[dict[str, float]], None]  # takes an evaluation's row


@dataclass(frozen=True)
class Point:
    """One evaluation of one run."""

    contestant: str
    seed: int
    seconds: float  # training clock at the iteration's end
    iteration: int
    nash_conv: float


@dataclass
class Run:
    """A complete trial: its points and totals."""

    contestant: str
    seed: int
    iterations: int
    train_seconds: float
    wall_seconds: float  # the trial's process: start, imports and evaluations included
    points: list[Point] = field(default_factory=list)


class TrainingClock:
    """One run's training clock, evaluation points and budget (module docstring): wall-clock
    since :meth:`start` less the evaluations' time, during which it is paused.

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


# ---- the contestants (each in a trial's process) ----------------------------------------------
def run_openspiel(args: argparse.Namespace, record: Record) -> None:
    """OpenSpiel's ``DeepCFRSolver``, iterated as its ``solve()`` is, its average policy
    trained afresh at each evaluation (module docstring) and measured by OpenSpiel."""
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
    """``fit``'s arguments for the trial ``args``: its config and the overrides of the module
    docstring (the adapter's rules for ``ours_adapter``)."""
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


def run_trial(argv: list[str]) -> None:
    """This script's ``trial`` entry: one (contestant, seed) in this process. Ours is a
    ``fit`` of :func:`fit_argv`; OpenSpiel's solvers write their evaluations' rows to
    ``RUN_DIR/metrics.csv`` as they come, for the sweep to follow."""
    parser = argparse.ArgumentParser(prog=f"{SCRIPT.name} trial")
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


# ---- the sweep --------------------------------------------------------------------------------
def trial_command(
    spec: SweepSpec, params: dict[str, Any], run_dir: Path, threads: int
) -> list[str] | None:
    """A trial's process, :class:`SweepRunner`'s ``command``: this script's ``trial`` entry;
    None (not run) for CFR+ past the first seed, which would repeat it."""
    if params[CONTESTANT] == "cfr_plus" and params[SEED] != spec.seeds[0]:
        return None
    trial = ["--contestant", params[CONTESTANT], "--seed", params[SEED], "--run-dir", run_dir]
    mine = ["--config", spec.configs[0], *spec.overrides, *trial, "--threads", threads]
    return [sys.executable, str(SCRIPT), "trial", *map(str, mine)]


def open_sweep(args: argparse.Namespace) -> optuna.Study:
    """The comparison's study in ``--out`` (created, joined or grown; ConfigError: one of
    other settings is there) and the ``sweep.json`` that ``report`` reads. Its overrides are
    the ``trial`` arguments every trial shares; its config ours (``os.devnull``: none)."""
    settings = f"--game={args.game} --seconds={args.seconds!r} --eval-every={args.eval_every!r}"
    spec = SweepSpec(
        configs=[args.config or os.devnull],
        overrides=settings.split(),
        seeds=list(range(args.seeds)),
        grid={CONTESTANT: list(args.contestants)},
        metric=NASH_CONV,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.out.resolve().name
    study = studies.open_study(spec, name, studies.storage_url(str(args.out)))
    (args.out / SWEEP_FILE).write_text(json.dumps({"study": name, "storage": None}) + "\n")
    return study


def load_sweep(folder: Path) -> optuna.Study:
    """The study of the comparison in ``folder`` (another call's ``--out``)."""
    where = json.loads((folder / SWEEP_FILE).read_text())
    return studies.load_study(where["study"], where["storage"] or studies.storage_url(str(folder)))


def study_runs(study: optuna.Study, folder: Path, label: str = "") -> list[Run]:
    """The complete trials of the comparison in ``folder``, read from their ``metrics.csv``
    (in ``folder``/trials/, wherever the folder was when they ran), each named ``label``
    and its contestant."""
    spec = studies.spec_of(study)
    runs = []
    for trial in [t for t in studies.results(study) if t.state == TrialState.COMPLETE]:
        params = studies.trial_params(study, trial, spec)
        name, seed = label + params[CONTESTANT], params[SEED]
        run_dir = folder / TRIALS_DIR / Path(trial.user_attrs[studies.RUN_DIR]).name
        iterations, columns = read_metrics(find_metrics_files(run_dir))
        at = ~np.isnan(columns[NASH_CONV])
        rows = zip(columns[SECONDS][at], iterations[at], columns[NASH_CONV][at], strict=True)
        points = [Point(name, seed, float(s), int(i), float(v)) for s, i, v in rows]
        last, wall = points[-1], trial.user_attrs["seconds"]
        runs.append(Run(name, seed, last.iteration, last.seconds, wall, points))
    return sorted(runs, key=lambda r: (*order(r.contestant), r.seed))


# ---- summaries --------------------------------------------------------------------------------
def latest(points: Sequence[Point], axis: str, at: float) -> float:
    """NashConv of the latest of ``points`` at or before ``at`` on ``axis`` (``seconds`` or
    ``iteration``); NaN if none is."""
    before = [p for p in points if getattr(p, axis) <= at]
    return max(before, key=lambda p: getattr(p, axis)).nash_conv if before else math.nan


def closing(points: Sequence[Point], at: float) -> float:
    """NashConv of the evaluation that closes second ``at``: the first at or after it (a run
    is evaluated at the first iteration end past each ``--eval-every`` seconds), or the
    run's last if it ended before ``at``."""
    after = [p for p in points if p.seconds >= at]
    return min(after, key=lambda p: p.seconds).nash_conv if after else points[-1].nash_conv


def band(runs: Sequence[Run], axis: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, median, low, high)`` over ``runs`` (seeds) on ``axis``: each run's NashConv as a
    step function (its latest evaluation), from where every run has one."""
    x = np.array(sorted({getattr(p, axis) for run in runs for p in run.points}))
    values = np.array([[latest(run.points, axis, at) for at in x] for run in runs])
    every = ~np.isnan(values).any(0)
    x, values = x[every], values[:, every]
    return x, np.median(values, 0), values.min(0), values.max(0)


def by_contestant(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs per contestant: the script's own in their fixed order, runs shown ``--beside``
    after them."""
    grouped: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (*order(r.contestant), r.seed)):
        grouped.setdefault(run.contestant, []).append(run)
    return grouped


def order(contestant: str) -> tuple[int, str]:
    fixed = contestant in CONTESTANTS
    return (CONTESTANTS.index(contestant) if fixed else len(CONTESTANTS), contestant)


def beside_runs(folders: Sequence[Path]) -> list[Run]:
    """The complete trials of another call in each of ``folders`` (its ``--out``: another
    config of ours, say), named ``<folder name>: <contestant>`` to be drawn and tabled beside."""
    return [run for f in folders for run in study_runs(load_sweep(f), f, f"{f.name}: ")]


def plot(runs: Sequence[Run], axis: str, uniform: float, game: str, out: Path) -> None:
    """Log NashConv against ``axis``: a median line and min-max band per contestant, CFR+
    dashed (and its last value as the floor), uniform play dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # The script's contestants keep their colours from figure to figure; --beside's follow.
    palette = [*CONTESTANTS, *sorted({run.contestant for run in runs} - set(CONTESTANTS))]
    for contestant, mine in by_contestant(runs).items():
        color = colors[palette.index(contestant) % len(colors)]
        x, median, low, high = band(mine, axis)
        floor = contestant == "cfr_plus"
        ax.step(
            x,
            median,
            where="post",
            marker="o",  # the evaluations (a run of one evaluation is a point)
            markersize=2.5,
            color=color,
            linestyle="--" if floor else "-",
            label=f"{LABELS.get(contestant, contestant)} ({len(mine)} seed{'s' * (len(mine) > 1)})",
        )
        ax.fill_between(x, low, high, step="post", color=color, alpha=0.2)
        if floor:
            ax.axhline(median[-1], color=color, linestyle="--", linewidth=0.8, alpha=0.6)
    ax.axhline(uniform, color="grey", linestyle=":", linewidth=1, label="uniform play")
    ax.set_yscale("log")
    if axis == "iteration":
        ax.set_xscale("log")
        ax.set_xlabel("iterations (each algorithm's own)")
    else:
        ax.set_xlabel("training seconds (one thread; evaluation excluded)")
    ax.set_ylabel("exact NashConv")
    ax.set_title(f"{game}: median over seeds, min-max band")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def table(runs: Sequence[Run], budget_s: float) -> str:
    """Median NashConv of each contestant at each of TABLE_MINUTES within the budget (the
    evaluation that closes it: :func:`closing`), at its end, and its median iterations."""
    marks = [m for m in TABLE_MINUTES if 60 * m <= budget_s]
    header = f"{'contestant':14}" + "".join(f"{f'{m} min':>9}" for m in marks)
    lines = [header + f"{'end':>9}{'train s':>9}{'iterations':>12}"]
    for contestant, mine in by_contestant(runs).items():
        cells = []
        for m in marks:
            values = [closing(run.points, 60 * m) for run in mine]
            cells.append(f"{statistics.median(values):9.4f}")
        end = statistics.median(run.points[-1].nash_conv for run in mine)
        seconds = statistics.median(run.train_seconds for run in mine)
        iterations = statistics.median(run.iterations for run in mine)
        lines.append(f"{contestant:14}{''.join(cells)}{end:9.4f}{seconds:9.1f}{iterations:12g}")
    return "\n".join(lines)


def uniform_nash_conv(game_name: str) -> float:
    import pyspiel
    from open_spiel.python import policy
    from open_spiel.python.algorithms import exploitability

    game = pyspiel.load_game(game_name)
    return float(exploitability.nash_conv(game, policy.UniformRandomPolicy(game)))


# ---- the command line -------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="leduc_poker", help="an OpenSpiel game's name")
    parser.add_argument("--seconds", type=float, help="training clock per run (900; quick 2)")
    parser.add_argument("--seeds", type=int, help="seeds 0..N-1 (3; quick 1)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one thread each)")
    parser.add_argument(
        "--eval-every", type=float, help="seconds of training clock between evaluations (15)"
    )
    parser.add_argument("--config", help="our DeepCFR config (the game's, under configs/)")
    parser.add_argument(
        "--contestants", default=",".join(CONTESTANTS), help="a comma-separated subset"
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs/figures/side_by_side")
    parser.add_argument("--quick", action="store_true", help="the test's: 2 s, 1 seed, 0.5 s")
    parser.add_argument(
        "--beside",
        type=Path,
        nargs="*",
        default=[],
        help="other --out folders (another config, say) whose complete trials are drawn and "
        "tabled beside these, named by their folder",
    )
    args = parser.parse_args(argv)
    defaults = (2.0, 1, 0.5) if args.quick else (900.0, 3, 15.0)
    for name, default in zip(("seconds", "seeds", "eval_every"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.contestants = comma_list(parser, "--contestants", args.contestants, CONTESTANTS)
    if args.config is None:
        if args.game not in DEFAULT_CONFIGS and set(FITTED) & set(args.contestants):
            parser.error(f"--config: no default config for {args.game}; name one")
        args.config = str(DEFAULT_CONFIGS.get(args.game, ""))
    for folder in args.beside:  # refused before anything trains
        try:
            settings = studies.spec_of(load_sweep(folder)).overrides
            game = dict(o.split("=", 1) for o in settings)["--game"]
        except (OSError, ConfigError) as error:
            parser.error(f"--beside {folder}: no comparison's study there ({error})")
        if game != args.game:
            parser.error(f"--beside {folder}: a comparison on {game}; expected {args.game}")
    check_counts(parser, args)
    return args


def comma_list(
    parser: argparse.ArgumentParser, flag: str, text: str, allowed: Sequence[str]
) -> list[str]:
    """``text``'s comma-separated names, each one of ``allowed`` (else the parser's error,
    naming ``flag`` and the unknown ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(names) - set(allowed))
    if unknown or not names:
        parser.error(f"{flag}: {unknown or 'none'}; choose from {', '.join(allowed)}")
    return names


def check_counts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A budget, an evaluation interval, seeds and jobs that can run (else the parser's
    error)."""
    if not min(args.seconds, args.eval_every) > 0 or min(args.seeds, args.jobs) < 1:
        parser.error("--seconds and --eval-every must be positive, --seeds and --jobs >= 1")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["trial"]:
        run_trial(argv[1:])
        return
    args = parse_args(argv)
    try:
        study = open_sweep(args)
    except ConfigError as error:
        raise SystemExit(f"{SCRIPT.name}: error: {error}") from None
    runner = SweepRunner(study, studies.spec_of(study), args.out, args.jobs, command=trial_command)
    print(f"{args.game}, {args.seconds:g} s a run, {args.jobs} at a time: {runner.status()}")
    try:
        runner.run()
    except KeyboardInterrupt:
        raise SystemExit("interrupted: rerun the same command to go on") from None
    failed = [
        f"{t.number}: {t.user_attrs.get(studies.ERROR, t.state.name)}"
        for t in studies.results(study)
        if t.state != TrialState.COMPLETE
    ]
    if failed:  # their output: --out/trials/N/fit.log
        raise SystemExit(f"trials that did not complete: {'; '.join(failed)}")
    runs = study_runs(study, args.out)
    uniform = uniform_nash_conv(args.game)
    settings = {
        **{k: v for k, v in vars(args).items() if k not in ("out", "quick", "beside")},
        "beside": [str(folder) for folder in args.beside],
        "openspiel_settings": OPENSPIEL_EXAMPLE,
        "cfr_plus_iterations": CFR_PLUS_ITERATIONS,
        "threads_per_run": 1,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python "
        f"{platform.python_version()}, torch {torch.__version__}",
    }
    result = {
        "settings": settings,
        "uniform_nash_conv": uniform,
        "runs": [{k: v for k, v in asdict(run).items() if k != "points"} for run in runs],
        "points": [asdict(p) for run in runs for p in run.points],
    }
    (args.out / "side_by_side.json").write_text(json.dumps(result, indent=1) + "\n")
    shown = runs + beside_runs(args.beside)  # the JSON holds this call's runs only
    for axis, name in (("seconds", "nashconv_vs_seconds"), ("iteration", "nashconv_vs_iterations")):
        plot(shown, axis, uniform, args.game, args.out / f"{name}.png")
    print(f"\nMedian exact NashConv on {args.game} (uniform play {uniform:.3f}):")
    print(table(shown, args.seconds))
    print(
        f"\nwrote {args.out}/side_by_side.json, nashconv_vs_seconds.png, nashconv_vs_iterations.png"
        f"; over seeds: python -m lostcities_cfr report {args.out}"
    )


if __name__ == "__main__":
    main()
