"""Strength against wall-clock: win rate against each opponent vs minutes of training, per run.

Reads each run folder's CSV logs as ``report`` does (``csv/version_*/metrics.csv``, the
CSVLogger of every config; a resumed run writes a new version, and the versions are merged
by iteration, the later one winning), takes the ``eval/<policy>/<opponent>/win_rate`` points that
``PeriodicEvaluation`` and the final evaluation logged with their 95% intervals, and the
``best/...`` points of ``BestCheckpoint`` (the deployed policy on its selection deals, drawn
as the policy "<policy> (selection)"), and puts each at the run's clock
when its iteration ended (``time/elapsed_s``, logged by ``PhaseTimer``; runs logged before
it existed fall back to the running sum of ``time/iteration_s``). Draws one PNG, one panel
per opponent, one line per run (and policy, where a run evaluated several), with the
interval as a band; prints the points as a table, or with ``--json`` as JSON.

    python scripts/tools/strength_curves.py RUN_DIR [RUN_DIR ...] [--labels A B ...]
        [--policy NAME] [--out strength.png] [--json]

Runs compare fairly only on the same machine and load: note both beside the figure.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics

# PeriodicEvaluation's and the final evaluation's points (eval/), BestCheckpoint's (best/).
CURVE_KEY = re.compile(r"^(?P<root>eval|best)/(?P<policy>[^/]+)/(?P<opponent>.+)/win_rate$")


@dataclass(frozen=True)
class Point:
    """One evaluation of one run's policy against one opponent."""

    run: str
    policy: str
    opponent: str
    iteration: int
    minutes: float
    win_rate: float
    ci_low: float
    ci_high: float


def elapsed_minutes(columns: dict[str, np.ndarray], n: int) -> np.ndarray:
    """[n] minutes of training at each iteration's end (see the module docstring)."""
    if "time/elapsed_s" in columns:
        return columns["time/elapsed_s"] / 60
    if "time/iteration_s" in columns:
        return np.cumsum(np.nan_to_num(columns["time/iteration_s"], nan=0.0)) / 60
    return np.full(n, math.nan)


def strength_points(run_dir: Path, label: str, policy: str | None = None) -> list[Point]:
    """Every evaluation point of a run (of ``policy`` only, if given)."""
    iterations, columns = read_metrics(find_metrics_files(run_dir))
    minutes = elapsed_minutes(columns, len(iterations))
    points = []
    for name in sorted(columns):
        match = CURVE_KEY.match(name)
        if not match or (policy is not None and match["policy"] != policy):
            continue
        drawn = match["policy"] + (" (selection)" if match["root"] == "best" else "")
        prefix = name.removesuffix("win_rate")
        low = columns.get(prefix + "win_rate_ci_low", np.full(len(iterations), math.nan))
        high = columns.get(prefix + "win_rate_ci_high", np.full(len(iterations), math.nan))
        for i in np.flatnonzero(~np.isnan(columns[name]) & ~np.isnan(minutes)):
            points.append(
                Point(
                    label,
                    drawn,
                    match["opponent"],
                    int(iterations[i]),
                    float(minutes[i]),
                    float(columns[name][i]),
                    float(low[i]),
                    float(high[i]),
                )
            )
    return points


def plot(points: list[Point], out: Path) -> None:
    """One panel per opponent, win rate (with its band) against minutes, a line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opponents = list(dict.fromkeys(p.opponent for p in points))
    lines = list(dict.fromkeys((p.run, p.policy) for p in points))
    several_policies = len({policy for _, policy in lines}) > 1
    fig, axes = plt.subplots(
        1, len(opponents), figsize=(4.5 * len(opponents), 4), squeeze=False, sharey=True
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, opponent in zip(axes[0], opponents, strict=True):
        for n, (run, policy) in enumerate(lines):
            mine = sorted(
                (p for p in points if (p.run, p.policy, p.opponent) == (run, policy, opponent)),
                key=lambda p: p.minutes,
            )
            if not mine:
                continue
            x = [p.minutes for p in mine]
            color = colors[n % len(colors)]
            label = f"{run} ({policy})" if several_policies else run
            ax.plot(
                x, [p.win_rate for p in mine], marker="o", markersize=3, color=color, label=label
            )
            ax.fill_between(
                x, [p.ci_low for p in mine], [p.ci_high for p in mine], color=color, alpha=0.15
            )
        ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylim(0, 1)
        ax.set_title(f"vs {opponent}")
        ax.set_xlabel("training wall-clock (minutes)")
    axes[0, 0].set_ylabel("win rate (95% interval)")
    save_panels(fig, axes, out)


def save_panels(fig, axes, out: Path) -> None:
    """Write a row of panels (one per opponent) with one legend for every line: a line need
    not appear in every panel (a run need not have played every opponent)."""
    import matplotlib.pyplot as plt

    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    axes[0, -1].legend(handles.values(), handles.keys(), fontsize="small", loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def table(points: list[Point]) -> str:
    """The points as a table: a row per run, policy and evaluated iteration."""
    opponents = list(dict.fromkeys(p.opponent for p in points))
    rows: dict[tuple[str, str, int], dict[str, Point]] = {}
    for p in points:
        rows.setdefault((p.run, p.policy, p.iteration), {})[p.opponent] = p
    width = max([len(run) for run, _, _ in rows] + [3])
    header = f"{'run':{width}}  {'policy':8} {'iter':>5} {'min':>6}"
    header += "".join(f"  {o:>20}" for o in opponents)
    lines = [header]
    for (run, policy, iteration), by_opponent in rows.items():
        minutes = next(iter(by_opponent.values())).minutes
        line = f"{run:{width}}  {policy:8} {iteration:5d} {minutes:6.1f}"
        for o in opponents:
            p = by_opponent.get(o)
            cell = (
                ""
                if p is None
                else f"{100 * p.win_rate:5.1f}% [{100 * p.ci_low:4.1f},{100 * p.ci_high:5.1f}]"
            )
            line += f"  {cell:>20}"
        lines.append(line)
    return "\n".join(lines)


def print_points(points: list, table: Callable[[list], str], out: Path, as_json: bool) -> None:
    """The points (dataclasses) as JSON, or as ``table`` draws them, then where the PNG went."""
    if as_json:
        json.dump([asdict(p) for p in points], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(table(points))
        print(f"\nwrote {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (holding csv/)")
    parser.add_argument("--labels", nargs="+", default=None, help="one per run (folder names)")
    parser.add_argument("--policy", default=None, help="only this policy (default: all)")
    parser.add_argument("--out", type=Path, default=Path("strength.png"), help="the PNG")
    parser.add_argument("--json", action="store_true", help="print the points as JSON")
    args = parser.parse_args(argv)
    labels = args.labels or [run.name for run in args.runs]
    if len(labels) != len(args.runs):
        parser.error(f"--labels: {len(labels)} labels for {len(args.runs)} runs")
    points = []
    for run, label in zip(args.runs, labels, strict=True):
        try:
            found = strength_points(run, label, args.policy)
        except FileNotFoundError as error:
            parser.exit(2, f"{parser.prog}: error: {error}\n")
        if not found:
            print(f"{run}: no eval/ or best/<policy>/<opponent>/win_rate points", file=sys.stderr)
        points += found
    if not points:
        parser.exit(2, f"{parser.prog}: error: no evaluation points in any run\n")
    plot(points, args.out)
    print_points(points, table, args.out, as_json=args.json)


if __name__ == "__main__":
    main()
