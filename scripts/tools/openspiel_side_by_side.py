"""Our Deep CFR beside OpenSpiel's, on the same game, clock and thread: exact NashConv
against seconds of training and against iterations.

Four contestants train on ``--game`` (``leduc_poker``; ``kuhn_poker`` too) for ``--seconds``
of training clock each. Every (contestant, seed) is a trial of one sweep study in ``--out``
(a grid over ``contestant``, and ``--seeds``) that ``SweepRunner`` (``lostcities_cfr.sweeps``)
runs ``--jobs`` at a time, each in a process (this script's ``trial`` entry, whose code is
``side_by_side_trial.py`` beside it) and a folder (``--out``/trials/N) of its own on one torch
thread, logging its evaluations to its ``metrics.csv``: ``iteration``, ``nash_conv``, and
``time/elapsed_s`` (the training clock).

- ``openspiel``: OpenSpiel's PyTorch ``DeepCFRSolver`` with the settings of its example
  (``open_spiel/python/examples/deep_cfr_pytorch.py``: 64-unit networks, 375 traversals an
  iteration, 375 advantage and 2,500 strategy updates of 256 rows), iterated as its
  ``solve()`` does.
- ``ours``: :class:`~lostcities_cfr.training.module.DeepCFR` from ``--config`` (by default
  the game's best: ``configs/leduc_sdcfr.yaml``, ``configs/kuhn_sdcfr.yaml``) on our batched
  engine, run in the trial's process through ``python -m lostcities_cfr fit``'s own entry
  point (``commands/fit.py``'s ``run``) with overrides (``side_by_side_trial.fit_argv``): one
  thread, the seed, the trial's folder, a CSV logger alone, the run's own exploitability
  logging off, and the ``NashConvClock`` callback (``side_by_side_trial.py``) in place of the
  config's callbacks: it logs the evaluations. Any model with the game's ``exact_policy``
  runs (PPO and MMD too).
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
import json
import math
import os
import platform
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from optuna.trial import TrialState
from side_by_side_trial import (
    CFR_PLUS_ITERATIONS,
    CONTESTANTS,
    FITTED,
    NASH_CONV,
    OPENSPIEL_EXAMPLE,
    SECONDS,
    run_trial,
)

from lostcities_cfr.commands.sweep import SWEEP_FILE
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.sweeps.runner import TRIALS_DIR, SweepRunner
from lostcities_cfr.sweeps.spec import SEED, SweepSpec

LABELS = {
    "openspiel": "OpenSpiel Deep CFR (PyTorch, example settings)",
    "ours_adapter": "ours over OpenSpiel's states (adapter)",
    "cfr_plus": "CFR+ (OpenSpiel, tabular)",
}
SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[2]
DEFAULT_CONFIGS = {
    "kuhn_poker": REPO / "configs/kuhn_sdcfr.yaml",
    "leduc_poker": REPO / "configs/leduc_sdcfr.yaml",
}
TABLE_MINUTES = (1, 2, 5, 10, 15)
# The sweep's grid parameter: a trial's contestant (beside its seed).
CONTESTANT = "contestant"


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


def plot(
    runs: Sequence[Run],
    axis: str,
    uniform: float,
    game: str,
    out: Path,
    labels: Mapping[str, str] = LABELS,
) -> None:
    """Log NashConv against ``axis``: a median line and min-max band per contestant (named
    by ``labels``), CFR+ dashed (and its last value as the floor), uniform play dotted."""
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
            label=f"{labels.get(contestant, contestant)} ({len(mine)} seed{'s' * (len(mine) > 1)})",
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
        run_trial(argv[1:], f"{SCRIPT.name} trial")
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
    # ours is whatever --config trains (MMD, say): the legend names the config
    labels = {**LABELS, "ours": f"ours: {Path(args.config).name}"}
    for axis, name in (("seconds", "nashconv_vs_seconds"), ("iteration", "nashconv_vs_iterations")):
        plot(shown, axis, uniform, args.game, args.out / f"{name}.png", labels)
    print(f"\nMedian exact NashConv on {args.game} (uniform play {uniform:.3f}):")
    print(table(shown, args.seconds))
    print(
        f"\nwrote {args.out}/side_by_side.json, nashconv_vs_seconds.png, nashconv_vs_iterations.png"
        f"; over seeds: python -m lostcities_cfr report {args.out}"
    )


if __name__ == "__main__":
    main()
