"""The benchmark table over seeds: our SD-CFR, ESCHER, PPO and MMD beside OpenSpiel's Deep CFR
and tabular CFR+, on Kuhn, Leduc and Liar's Dice, at equal seconds of training clock on one
machine, each a median and an interval over seeds.

Each (game, algorithm of ours) is one call of ``openspiel_side_by_side.py`` (beside this file):
a sweep study of its own in ``--out``/<config> (``configs/<game>_<algorithm>.yaml`` as
shipped, over ``--seeds``), its trials on one torch thread. The SD-CFR call of a game also runs
OpenSpiel's Deep CFR and CFR+ (``--contestants openspiel,ours,cfr_plus``); the others run
``ours``. Calls run ``--jobs`` at a time, one trial each, the longest first; a call whose study
is finished runs nothing again, so a killed table resumes where it stopped and a finished one
only re-tables. The side-by-side script's clock, evaluations and fairness choices hold
(its docstring): exact NashConv of each deployed policy, evaluation time off the clock.

Output: ``--out``/benchmark.md (a table a game: each row's NashConv per seed at the end of the
budget, its median, its interquartile mean with a 95% stratified-bootstrap interval,
the median at the budget's first minute, iterations; and the probability that an SD-CFR seed
ends below each other row's), ``benchmark.json`` (the same figures), and per game the
figures of every row (``--out``/<game>_sdcfr/nashconv_vs_seconds_all.png, and against
iterations).

    python scripts/tools/benchmark_table.py [--seconds 120] [--seeds 5] [--eval-every 30]
        [--jobs 2] [--games kuhn_poker,leduc_poker,liars_dice] [--out runs/sweeps/bench]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import openspiel_side_by_side as side

from lostcities_cfr.sweeps.statistics import (
    improvement_interval,
    iqm,
    iqm_interval,
    probability_of_improvement,
)

GAMES = {"kuhn_poker": "kuhn", "leduc_poker": "leduc", "liars_dice": "liars_dice"}
# Our algorithms, each a shipped config <prefix>_<name>.yaml; SD-CFR's call runs the others'.
ALGORITHMS = ("sdcfr", "escher", "ppo", "mmd")
WITH_OPENSPIEL = "openspiel,ours,cfr_plus"
ROW_NAMES = {
    "sdcfr": "SD-CFR (ours)",
    "escher": "ESCHER (ours)",
    "ppo": "PPO (ours)",
    "mmd": "MMD (ours)",
    "openspiel": "OpenSpiel Deep CFR",
    "cfr_plus": "CFR+ (OpenSpiel, tabular)",
}


def config_name(game: str, algorithm: str) -> str:
    """The shipped config (and the call's folder) of ``algorithm`` on ``game``."""
    return f"{GAMES[game]}_{algorithm}"


def calls(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """``(folder name, side-by-side arguments)`` of every call, those that run OpenSpiel's
    solvers (the longest) first."""
    made = []
    for algorithm in ALGORITHMS:
        for game in args.games:
            config = config_name(game, algorithm)
            contestants = WITH_OPENSPIEL if algorithm == "sdcfr" else "ours"
            made.append(
                (
                    config,
                    [
                        *("--game", game, "--seconds", f"{args.seconds:g}"),
                        *("--seeds", str(args.seeds), "--jobs", "1"),
                        *("--eval-every", f"{args.eval_every:g}"),
                        *("--config", f"configs/{config}.yaml"),  # from the repository
                        *("--contestants", contestants, "--out", str(args.out.resolve() / config)),
                    ],
                )
            )
    return made


def run_calls(args: argparse.Namespace) -> None:
    """Every call, ``--jobs`` at a time, each logging to ``--out``/<folder>.log."""
    todo = calls(args)

    def one(call: tuple[str, list[str]]) -> int:
        name, argv = call
        with (args.out / f"{name}.log").open("a") as log:
            done = subprocess.run(
                [sys.executable, str(side.SCRIPT), *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=side.REPO,  # the study records the config's path as given
            )
        print(f"{name}: {'done' if done.returncode == 0 else f'exit {done.returncode}'}")
        return done.returncode

    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        failed = [name for (name, _), rc in zip(todo, pool.map(one, todo), strict=True) if rc]
    if failed:
        raise SystemExit(f"calls that did not finish (their log in {args.out}): {failed}")


def renamed(run: side.Run, name: str) -> side.Run:
    """``run`` with its points, drawn as ``name``."""
    points = [replace(p, contestant=name) for p in run.points]
    return replace(run, contestant=name, points=points)


def game_rows(runs: dict[str, Sequence[side.Run]], seconds: float) -> list[dict]:
    """Per row (name: its seeds' runs), its figures at ``seconds`` of training clock (the
    evaluation that closes it: ``side.closing``) and at the first minute."""
    rows = []
    for name, mine in runs.items():
        mine = sorted(mine, key=lambda r: r.seed)
        end = np.array([side.closing(run.points, seconds) for run in mine])
        low, high = iqm_interval(end)
        rows.append(
            {
                "name": name,
                "seeds": [run.seed for run in mine],
                "end": end.tolist(),
                "median": float(np.median(end)),
                "iqm": float(iqm(end)),
                "iqm_ci": [low, high],
                "first_minute": float(
                    statistics.median(side.closing(run.points, 60.0) for run in mine)
                ),
                "iterations": float(statistics.median(run.iterations for run in mine)),
            }
        )
    sdcfr = next((r for r in rows if r["name"] == ROW_NAMES["sdcfr"]), None)
    for row in rows:  # P(an SD-CFR seed ends below this row's seed), lower NashConv better
        if sdcfr is None or row is sdcfr or len(row["end"]) < 2:
            continue
        x, y = np.array(sdcfr["end"]), np.array(row["end"])
        row["sdcfr_better"] = float(probability_of_improvement(x, y, higher_is_better=False))
        row["sdcfr_better_ci"] = list(improvement_interval(x, y, higher_is_better=False))
    return rows


def markdown(game: str, rows: Sequence[dict], seconds: float, uniform: float) -> str:
    """A game's table (``docs/games.md``'s form)."""
    seeds = max(len(r["seeds"]) for r in rows)
    head = " | ".join(f"seed {s}" for s in range(seeds))
    lines = [
        f"**{game}** (uniform play {uniform:.4f}; NashConv at {seconds:g} s of training clock)",
        "",
        f"| | {head} | median | IQM [95% CI] | median at 60 s | iterations | "
        "P(SD-CFR lower) [95% CI] |",
        "|---|" + "---:|" * seeds + "---:|---|---:|---:|---|",
    ]
    for row in rows:
        by_seed = dict(zip(row["seeds"], row["end"], strict=True))
        cells = [f"{by_seed[s]:.4g}" if s in by_seed else "-" for s in range(seeds)]
        if len(row["end"]) > 1:
            interval = f"{row['iqm']:.4g} [{row['iqm_ci'][0]:.4g}, {row['iqm_ci'][1]:.4g}]"
        else:
            interval = "one run (deterministic)"
        better = "-"
        if "sdcfr_better" in row:
            low, high = row["sdcfr_better_ci"]
            better = f"{row['sdcfr_better']:.2f} [{low:.2f}, {high:.2f}]"
        lines.append(
            f"| {row['name']} | {' | '.join(cells)} | {row['median']:.4g} | {interval} | "
            f"{row['first_minute']:.4g} | {row['iterations']:g} | {better} |"
        )
    return "\n".join(lines)


def tabulate(args: argparse.Namespace) -> None:
    """Read every call's study, write benchmark.md and .json, redraw each game's figures."""
    tables, figures = [], {}
    for game in args.games:
        runs: dict[str, list[side.Run]] = {}  # a row's name: its seeds' runs
        shown = []  # drawn: ours under the row's name, OpenSpiel's under the script's
        folders = {a: args.out / config_name(game, a) for a in ALGORITHMS}
        for algorithm, folder in folders.items():
            for run in side.study_runs(side.load_sweep(folder), folder):
                # ours is the call's algorithm; OpenSpiel's solvers go by their own names
                name = ROW_NAMES[algorithm if run.contestant == "ours" else run.contestant]
                runs.setdefault(name, []).append(run)
                shown.append(renamed(run, name) if run.contestant == "ours" else run)
        uniform = side.uniform_nash_conv(game)
        rows = game_rows(runs, args.seconds)
        figures[game] = {"uniform_nash_conv": uniform, "rows": rows}
        tables.append(markdown(game, rows, args.seconds, uniform))
        for axis, name in (("seconds", "seconds"), ("iteration", "iterations")):
            figure = folders[ALGORITHMS[0]] / f"nashconv_vs_{name}_all.png"
            side.plot(shown, axis, uniform, game, figure)
    text = "\n\n".join(tables) + "\n"
    (args.out / "benchmark.md").write_text(text)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "benchmark.json").write_text(
        json.dumps({"settings": settings, "games": figures}, indent=1) + "\n"
    )
    print(text + f"\nwrote {args.out}/benchmark.md, benchmark.json; figures in its <game>_sdcfr/")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="training clock a run")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--eval-every", type=float, default=30.0, help="seconds between")
    parser.add_argument("--jobs", type=int, default=2, help="calls at once (one run each)")
    parser.add_argument("--games", default=",".join(GAMES), help="a comma-separated subset")
    parser.add_argument("--out", type=Path, default=side.REPO / "runs/sweeps/bench")
    args = parser.parse_args(argv)
    args.games = side.comma_list(parser, "--games", args.games, list(GAMES))
    side.check_counts(parser, args)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_calls(args)
    tabulate(args)


if __name__ == "__main__":
    main()
