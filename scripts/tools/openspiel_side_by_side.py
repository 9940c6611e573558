"""Our Deep CFR beside OpenSpiel's, on the same game, clock and thread: exact NashConv
against seconds of training and against iterations.

Four contestants train on ``--game`` (``leduc_poker``; ``kuhn_poker`` too) for ``--seconds``
of training clock each, every (contestant, seed) in its own worker process (``spawn``,
``--jobs`` at a time) on one torch thread:

- ``openspiel``: OpenSpiel's PyTorch ``DeepCFRSolver`` with the settings of its example
  (``open_spiel/python/examples/deep_cfr_pytorch.py``: 64-unit networks, 375 traversals an
  iteration, 375 advantage and 2,500 strategy updates of 256 rows), iterated as its
  ``solve()`` does.
- ``ours``: :class:`~lostcities_cfr.training.module.DeepCFR` from ``--config`` (by default
  the game's best: ``configs/leduc_sdcfr.yaml``, ``configs/kuhn_sdcfr.yaml``) on our batched engine,
  run in-process through ``python -m lostcities_cfr fit``'s own entry point
  (``commands/fit.py``'s ``run``) with overrides: one thread, the seed, no loggers, checkpoints in a
  temporary folder, the run's own exploitability logging off, and this script's
  ``NashConvClock`` callback.
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
  is written after the clock stops.
- Process start, imports and building a solver or model are outside every clock.
- CFR+ is deterministic: it runs once, with the first seed.

Each finished run is kept in ``--out``/runs/ at once, and a call with the same ``--out``
reuses those runs (a stopped comparison loses only the runs in progress; delete the folder
to start afresh). Output in ``--out`` (``docs/figures/side_by_side/``): ``side_by_side.json`` (every point:
contestant, seed, seconds, iteration, nash_conv; every run's totals; the settings and the
uniform policy's NashConv), ``nashconv_vs_seconds.png`` and ``nashconv_vs_iterations.png``
(median over seeds, min-max band, CFR+ dashed); a table of the median NashConv at 1, 2, 5,
10 and 15 minutes (those within the budget; the evaluation that closes each, the first at or
after it) is printed. Runs compare fairly only on the same machine under the same load: note both.

    python scripts/tools/openspiel_side_by_side.py [--game leduc_poker] [--seconds 900] [--seeds 3]
        [--jobs 2] [--eval-every 15] [--config configs/leduc_sdcfr.yaml]
        [--contestants openspiel,ours,ours_adapter,cfr_plus] [--out DIR] [--quick]
        [--beside DIR ...]

``--quick`` (the test's): 2 s a run, one seed, an evaluation every 0.5 s. ``--beside``
draws and tables the runs kept in other ``--out`` folders beside this call's, each named
by its folder: two configs of ours, run by two calls side by side, in one figure.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import logging
import math
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lostcities_cfr.errors import ConfigError

CONTESTANTS = ("openspiel", "ours", "ours_adapter", "cfr_plus")
LABELS = {
    "openspiel": "OpenSpiel Deep CFR (PyTorch, example settings)",
    "ours": "ours: DeepCFR on the batched engine",
    "ours_adapter": "ours over OpenSpiel's states (adapter)",
    "cfr_plus": "CFR+ (OpenSpiel, tabular)",
}
REPO = Path(__file__).resolve().parents[2]
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
# How Lightning, in a worker, imports our runs' callback: this file as a module (sys.path
# holds its folder, as `python scripts/...` has it), and the callback's name in it.
MODULE = Path(__file__).stem
CALLBACK = "NashConvClock"


@dataclass(frozen=True)
class Point:
    """One evaluation of one run."""

    contestant: str
    seed: int
    seconds: float  # training clock at the iteration's end
    iteration: int
    nash_conv: float


@dataclass(frozen=True)
class Task:
    """One (contestant, seed) run and the settings it needs."""

    contestant: str
    seed: int
    game: str
    seconds: float
    eval_every: float
    config: str
    # What the config holds, comments aside (ours and ours_adapter; "" for the others): a
    # kept run of an edited config is not reused.
    config_digest: str = ""


def config_digest(contestant: str, config: str) -> str:
    """The digest of ``config``'s parsed YAML for the contestants that train it, else ""."""
    if contestant not in ("ours", "ours_adapter"):
        return ""
    import yaml

    parsed = yaml.safe_load(Path(config).read_text())
    return hashlib.sha256(json.dumps(parsed, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Run:
    """A finished run: its points and totals."""

    contestant: str
    seed: int
    iterations: int
    train_seconds: float
    wall_seconds: float  # the run's, evaluations included (not the worker's start)
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
        self.points: list[tuple[float, int, float]] = []  # (seconds, iteration, nash_conv)
        self.iterations = 0
        self._start = self._paused = 0.0
        self._next_eval = eval_every_s

    def start(self) -> None:
        self._start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._start - self._paused

    def end_iteration(self, iteration: int, measure: Callable[[], float]) -> bool:
        """At an iteration's end: ``measure()`` the NashConv if an evaluation is due, with the
        clock paused; whether the run is over."""
        seconds = self.seconds
        self.iterations = iteration
        over = seconds >= self.budget_s or iteration == self.max_iterations
        if (
            over
            or iteration == 1
            or iteration in self.eval_iterations
            or seconds >= self._next_eval
        ):
            paused_at = time.perf_counter()
            self.points.append((seconds, iteration, float(measure())))
            self._paused += time.perf_counter() - paused_at
            while self._next_eval <= seconds:
                self._next_eval += self.eval_every_s
        return over


def train_loop(
    clock: TrainingClock, iterate: Callable[[], None], measure: Callable[[], float]
) -> None:
    """Run ``iterate`` until ``clock`` says the run is over, evaluating as it says."""
    clock.start()
    iteration = 0
    while True:
        iterate()
        iteration += 1
        if clock.end_iteration(iteration, measure):
            return


# ---- the contestants (each runs in its own worker process) ------------------------------------
def run_openspiel(task: Task) -> TrainingClock:
    """OpenSpiel's ``DeepCFRSolver``, iterated as its ``solve()`` is, its average policy
    trained afresh at each evaluation (module docstring) and measured by OpenSpiel."""
    import pyspiel
    from open_spiel.python import policy
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.pytorch.deep_cfr import DeepCFRSolver

    game = pyspiel.load_game(task.game)
    solver = DeepCFRSolver(game, seed=task.seed, **OPENSPIEL_EXAMPLE)

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

    clock = TrainingClock(task.seconds, task.eval_every)
    train_loop(clock, iterate, measure)
    return clock


def run_cfr_plus(task: Task) -> TrainingClock:
    """OpenSpiel's tabular CFR+ (Python), its average policy measured by OpenSpiel."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.algorithms.cfr import CFRPlusSolver

    game = pyspiel.load_game(task.game)
    solver = CFRPlusSolver(game)
    clock = TrainingClock(task.seconds, math.inf, CFR_PLUS_EVALS, CFR_PLUS_ITERATIONS)
    train_loop(
        clock,
        solver.evaluate_and_update_policy,
        lambda: exploitability.nash_conv(game, solver.average_policy()),
    )
    return clock


def nash_conv_clock_class() -> type:
    """:class:`NashConvClock`, defined on first use (module ``__getattr__``): it subclasses
    Lightning's ``Callback``, and Lightning takes seconds to import, which only our runs'
    workers need (the package defers ``DeepCFR`` for the same reason)."""
    import pytorch_lightning as pl

    from lostcities_cfr.cfr.exploitability import exact_nash_conv

    class NashConvClock(pl.Callback):
        """Our side's clock in a ``fit``: at each iteration's end, the exact NashConv of the
        model's deployed policy when an evaluation is due (clock paused), and the stop once
        the budget is spent. ``game``: the game the run must train (the config's, checked)."""

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

            if self.clock.end_iteration(pl_module.iteration, measure):
                trainer.should_stop = True

    # a top-level name, as Lightning's saved config.yaml and pickle refer to it
    NashConvClock.__qualname__ = CALLBACK
    return NashConvClock


def __getattr__(name: str) -> Any:
    if name == CALLBACK:
        globals()[name] = nash_conv_clock_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fit_argv(task: Task, root_dir: str) -> list[str]:
    """``fit``'s arguments for ``task``: its config and the overrides of the module
    docstring (the adapter's rules for ``ours_adapter``)."""
    clock = {
        "class_path": f"{MODULE}.{CALLBACK}",
        "init_args": {"game": task.game, "budget_s": task.seconds, "eval_every_s": task.eval_every},
    }
    argv = [
        "--config",
        task.config,
        "--threads=1",
        f"--seed_everything={task.seed}",
        "--trainer.logger=false",
        f"--trainer.default_root_dir={root_dir}",
        "--trainer.max_epochs=-1",  # the budget ends the run
        "--trainer.max_time=null",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        "--checkpoint.every_n_epochs=0",  # no checkpoint but the networks at the end
        "--checkpoint.save_at_end=false",
        "--model.exploitability_every=0",  # NashConvClock measures, off the clock
        f"--trainer.callbacks+={json.dumps(clock)}",
    ]
    if task.contestant == "ours_adapter":
        rules = {"class_path": ADAPTER, "init_args": {"name": task.game}}
        argv.append(f"--model.rules={json.dumps(rules)}")
    return argv


def run_ours(task: Task) -> TrainingClock:
    """Our DeepCFR through ``python -m lostcities_cfr fit``'s entry point."""
    from lostcities_cfr.commands import fit as fit_cli

    for name in ("pytorch_lightning", "lightning_fabric"):  # set on import: now, not before
        logging.getLogger(name).setLevel(logging.WARNING)  # two workers' banners would mix
    folder = str(Path(__file__).resolve().parent)
    if folder not in sys.path:  # for Lightning to import MODULE (spawn passes sys.path on)
        sys.path.insert(0, folder)
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as root_dir:
        cli = fit_cli.run("fit", fit_argv(task, root_dir))
    callback_class = getattr(importlib.import_module(MODULE), CALLBACK)
    (callback,) = [c for c in cli.trainer.callbacks if isinstance(c, callback_class)]
    return callback.clock


RUNNERS: dict[str, Callable[[Task], TrainingClock]] = {
    "openspiel": run_openspiel,
    "ours": run_ours,
    "ours_adapter": run_ours,
    "cfr_plus": run_cfr_plus,
}


def load_run(kept: Path, task: Task) -> Run | None:
    """``task``'s run as an earlier call kept it in ``kept``; None if there is none, or if
    it ran with other settings (budget, config or its contents, evaluation interval)."""
    path = kept / f"{task.contestant}_{task.seed}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data["task"] != asdict(task):
        return None
    run = data["run"]
    run["points"] = [Point(**point) for point in run["points"]]
    return Run(**run)


def in_own_process(task: Task) -> Run:
    """:func:`run_task` in a fresh interpreter of its own (``spawn``): no torch, Lightning or
    random state shared by two runs. (A pool's workers replaced after each task would be
    started, importing torch, after the last task too.)"""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(run_task, task).result()


def run_task(task: Task) -> Run:
    """One run in this (worker) process, on one torch thread."""
    torch.set_num_threads(1)
    started = time.perf_counter()
    clock = RUNNERS[task.contestant](task)
    points = [Point(task.contestant, task.seed, *point) for point in clock.points]
    return Run(
        task.contestant,
        task.seed,
        clock.iterations,
        points[-1].seconds,
        time.perf_counter() - started,
        points,
    )


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
    """The runs another call kept in each of ``folders`` (its ``--out``: another config of
    ours, say), renamed ``<folder name>: <contestant>`` to be drawn and tabled beside."""
    runs = []
    for folder in folders:
        for path in sorted((folder / "runs").glob("*.json")):
            run = json.loads(path.read_text())["run"]
            name = f"{folder.name}: {run['contestant']}"
            run["points"] = [Point(**{**p, "contestant": name}) for p in run["points"]]
            runs.append(Run(**{**run, "contestant": name}))
    return runs


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
        help="other --out folders (another config, say) whose kept runs are drawn and tabled "
        "beside these, named by their folder",
    )
    args = parser.parse_args(argv)
    defaults = (2.0, 1, 0.5) if args.quick else (900.0, 3, 15.0)
    for name, default in zip(("seconds", "seeds", "eval_every"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.contestants = [c.strip() for c in args.contestants.split(",") if c.strip()]
    unknown = sorted(set(args.contestants) - set(CONTESTANTS))
    if unknown or not args.contestants:
        parser.error(f"--contestants: {unknown or 'none'}; choose from {', '.join(CONTESTANTS)}")
    if args.config is None:
        if args.game not in DEFAULT_CONFIGS and {"ours", "ours_adapter"} & set(args.contestants):
            parser.error(f"--config: no default config for {args.game}; name one")
        args.config = str(DEFAULT_CONFIGS.get(args.game, ""))
    for folder in args.beside:  # refused before anything trains
        games = {
            json.loads(p.read_text())["task"]["game"] for p in (folder / "runs").glob("*.json")
        }
        if games != {args.game}:
            found = ", ".join(sorted(games)) or "no kept runs"
            parser.error(f"--beside {folder}: {found} in {folder / 'runs'}; expected {args.game}")
    if min(args.seconds, args.eval_every) <= 0 or min(args.seeds, args.jobs) < 1:
        parser.error("--seconds and --eval-every must be positive, --seeds and --jobs >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    tasks = [
        Task(
            contestant,
            seed,
            args.game,
            args.seconds,
            args.eval_every,
            args.config,
            config_digest(contestant, args.config),
        )
        for seed in range(args.seeds)
        for contestant in args.contestants
        if contestant != "cfr_plus" or seed == 0  # deterministic: one run
    ]
    print(
        f"{len(tasks)} runs of {args.seconds:g} s training clock on {args.game}, "
        f"{args.jobs} at a time, one thread each"
    )
    # Each finished run is kept at once, and a rerun with the same --out reuses it: a long
    # comparison that is stopped loses only the runs in progress.
    kept = args.out / "runs"
    kept.mkdir(parents=True, exist_ok=True)
    runs = [run for run in (load_run(kept, task) for task in tasks) if run is not None]
    reused = {(run.contestant, run.seed) for run in runs}
    todo = [t for t in tasks if (t.contestant, t.seed) not in reused]
    if reused:
        print(f"  reusing {len(reused)} finished runs from {kept}")
    with ThreadPoolExecutor(args.jobs) as threads:
        futures = {threads.submit(in_own_process, task): task for task in todo}
        for done in as_completed(futures):
            run = done.result()
            runs.append(run)
            kept_file = kept / f"{run.contestant}_{run.seed}.json"
            kept_file.write_text(json.dumps({"task": asdict(futures[done]), "run": asdict(run)}))
            print(
                f"  {run.contestant} seed {run.seed}: NashConv {run.points[-1].nash_conv:.4f} "
                f"after {run.iterations} iterations, {run.train_seconds:.1f} s of training "
                f"({run.wall_seconds:.0f} s with evaluations)",
                flush=True,
            )
    uniform = uniform_nash_conv(args.game)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {
        **{k: v for k, v in vars(args).items() if k not in ("out", "quick", "beside")},
        "beside": [str(folder) for folder in args.beside],
        "openspiel_settings": OPENSPIEL_EXAMPLE,
        "cfr_plus_iterations": CFR_PLUS_ITERATIONS,
        "threads_per_run": 1,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python "
        f"{platform.python_version()}, torch {torch.__version__}",
    }
    runs.sort(key=lambda r: (CONTESTANTS.index(r.contestant), r.seed))
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
    )


if __name__ == "__main__":
    main()
