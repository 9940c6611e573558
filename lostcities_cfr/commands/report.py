"""``python -m lostcities_cfr report RUN_DIR``: PNG plots of a run, for people without W&B.

Reads the ``metrics.csv`` that Lightning's ``CSVLogger`` writes (the callback
stacks in ``callbacks/`` keep one next to W&B) and draws, against the CFR
iteration (the x-axis of every dashboard, ``docs/architecture.md``, "Logged metrics"):

- ``eval.png``: win rate with its 95% interval band and mean score difference,
  one panel per opponent, one line per policy (``eval/<policy>/<opponent>/...``);
- ``exploitability.png``: exploitability, when the run logged it (tiny rules);
- ``losses.png``: every ``loss/*`` metric;
- ``time.png``: each phase's share of the iteration and the iteration's seconds.

A figure whose metrics the run never logged is skipped and named in the output.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

METRICS_FILE = "metrics.csv"
VERSION = re.compile(r"^version_(\d+)$")  # CSVLogger's folder of one start of a run
EVAL_KEY = re.compile(r"^eval/(?P<policy>[^/]+)/(?P<opponent>.+)/win_rate$")
# Phases as stacked in time.png: the traversal's own work, then the parts of
# the traversal timed separately (network queries, buffer writes), then training
# and evaluation. Whatever the iteration spent elsewhere is "other".
PHASES = (
    ("traversal (engine, sampler)", "time/traversal_s"),
    ("policy network", "time/policy_network_s"),
    ("memory add", "time/memory_add_s"),
    ("advantage training", "time/advantage_train_s"),
    ("strategy training", "time/strategy_train_s"),
    ("evaluation", "time/eval_s"),
)
INSIDE_TRAVERSAL = ("time/policy_network_s", "time/memory_add_s")


def find_metrics_files(run_dir: Path) -> list[Path]:
    """The metrics files of a run, oldest first: ``RUN_DIR/metrics.csv`` alone, or else the
    newest ``metrics.csv`` below ``run_dir`` with those of its sibling ``version_N`` folders
    (a resumed run logs each start to a version of its own).

    Raises:
        FileNotFoundError: there is none (names the directory and the fix).
    """
    if run_dir.is_file():
        return [run_dir]
    direct = run_dir / METRICS_FILE
    if direct.is_file():
        return [direct]
    found = sorted(run_dir.rglob(METRICS_FILE), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(
            f"no {METRICS_FILE} in or below {run_dir}; report reads the CSVLogger's file, so "
            "run with a callback stack from callbacks/ (they keep a CSVLogger) or pass the "
            "folder that holds metrics.csv"
        )
    newest = found[-1]
    if not VERSION.match(newest.parent.name):
        return [newest]
    versions = [
        path
        for path in newest.parent.parent.glob(f"version_*/{METRICS_FILE}")
        if VERSION.match(path.parent.name)
    ]
    return sorted(versions, key=lambda p: int(VERSION.match(p.parent.name)[1]))


def read_metrics(paths: Path | Sequence[Path]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per-iteration metrics from CSVLogger files, merged in the order given.

    Returns ``(iterations [I], {name: values [I]})``, sorted by iteration; a
    metric missing at an iteration is ``nan``. Rows are keyed by the logged
    ``iteration`` (or ``epoch + 1`` where it is missing); when one iteration
    has several rows, the last value logged wins, so a resumed run's later file
    replaces what an interrupted start logged for the same iteration.
    """
    rows = []
    for path in [paths] if isinstance(paths, Path) else paths:
        with path.open(newline="") as file:
            rows += list(csv.DictReader(file))
    by_iteration: dict[int, dict[str, float]] = {}
    for row in rows:
        values = {key: _number(text) for key, text in row.items() if key is not None}
        iteration = values.get("iteration", math.nan)
        if math.isnan(iteration):
            iteration = values.get("epoch", math.nan) + 1
        if math.isnan(iteration):
            continue
        merged = by_iteration.setdefault(int(iteration), {})
        merged.update({k: v for k, v in values.items() if not math.isnan(v)})
    iterations = np.array(sorted(by_iteration), dtype=np.int64)
    names = sorted({name for values in by_iteration.values() for name in values})
    columns = {
        name: np.array([by_iteration[i].get(name, math.nan) for i in iterations]) for name in names
    }
    return iterations, columns


def _number(text: str | None) -> float:
    try:
        return float(text) if text else math.nan
    except ValueError:
        return math.nan


def plot_eval(iterations: np.ndarray, metrics: dict[str, np.ndarray], out: Path) -> bool:
    """``eval.png``: win rates with interval bands and score differences; False if none."""
    pairs = [m.groupdict() for m in map(EVAL_KEY.match, metrics) if m]
    if not pairs:
        return False
    opponents = sorted({p["opponent"] for p in pairs})
    policies = sorted({p["policy"] for p in pairs})
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        2, len(opponents), figsize=(4.5 * len(opponents), 7), squeeze=False, sharex=True
    )
    for column, opponent in enumerate(opponents):
        rate_ax, diff_ax = axes[0, column], axes[1, column]
        for policy in policies:
            prefix = f"eval/{policy}/{opponent}/"
            if prefix + "win_rate" not in metrics:
                continue
            for ax, name in ((rate_ax, "win_rate"), (diff_ax, "score_diff")):
                x, y = _present(iterations, metrics.get(prefix + name))
                if not len(x):
                    continue
                (line,) = ax.plot(x, y, marker="o", markersize=3, label=policy)
                low, high = (
                    metrics.get(prefix + name + "_ci_low"),
                    metrics.get(prefix + name + "_ci_high"),
                )
                if low is not None and high is not None:
                    keep = ~np.isnan(low) & ~np.isnan(high)
                    ax.fill_between(
                        iterations[keep], low[keep], high[keep], alpha=0.2, color=line.get_color()
                    )
        rate_ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
        rate_ax.set_ylim(0, 1)
        rate_ax.set_title(f"vs {opponent}")
        diff_ax.axhline(0, color="grey", linewidth=0.8, linestyle="--")
        diff_ax.set_xlabel("CFR iteration")
        rate_ax.legend(title="policy", fontsize="small")
    axes[0, 0].set_ylabel("win rate (95% interval)")
    axes[1, 0].set_ylabel("mean score difference (95% interval)")
    _save(fig, out / "eval.png")
    return True


def plot_exploitability(iterations: np.ndarray, metrics: dict[str, np.ndarray], out: Path) -> bool:
    """``exploitability.png`` for every ``exploitability*`` metric; False if none."""
    names = sorted(n for n in metrics if n.split("/")[-1].startswith("exploitability"))
    curves = [(n, *_present(iterations, metrics[n])) for n in names]
    curves = [(n, x, y) for n, x, y in curves if len(x)]
    if not curves:
        return False
    _plot_curves(curves, "exploitability", out / "exploitability.png")
    return True


def plot_losses(iterations: np.ndarray, metrics: dict[str, np.ndarray], out: Path) -> bool:
    """``losses.png`` for every ``loss/*`` metric; False if none."""
    curves = [(n, *_present(iterations, metrics[n])) for n in sorted(metrics)]
    curves = [(n, x, y) for n, x, y in curves if n.startswith("loss/") and len(x)]
    if not curves:
        return False
    labelled = [(n.removeprefix("loss/"), x, y) for n, x, y in curves]
    _plot_curves(labelled, "training loss (last epoch)", out / "losses.png")
    return True


def _plot_curves(
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]], ylabel: str, path: Path
) -> None:
    """One panel of ``(label, iterations, values)`` lines against the CFR iteration.

    The y-axis is logarithmic when every value is positive: losses and exploitability
    shrink by orders of magnitude over a run, which a linear axis flattens.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, x, y in curves:
        ax.plot(x, y, marker="o", markersize=3, label=label)
    if all((y > 0).all() for _, _, y in curves):
        ax.set_yscale("log")
    ax.set_xlabel("CFR iteration")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    _save(fig, path)


def phase_shares(metrics: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """Each phase's share of the iteration ([n] each), ``other`` last; sums to 1.

    The traversal's share excludes the network queries and buffer writes timed
    inside it, which have their own. Without ``time/iteration_s`` the phases'
    sum stands in for the iteration.
    """
    seconds = {key: np.nan_to_num(metrics.get(key, np.zeros(n)), nan=0.0) for _, key in PHASES}
    traversal = seconds["time/traversal_s"] - sum(seconds[k] for k in INSIDE_TRAVERSAL)
    seconds["time/traversal_s"] = np.clip(traversal, 0.0, None)
    total = sum(seconds.values())
    iteration = metrics.get("time/iteration_s")
    if iteration is not None:
        total = np.maximum(np.nan_to_num(iteration, nan=0.0), total)
    total = np.where(total > 0, total, 1.0)
    shares = {label: seconds[key] / total for label, key in PHASES}
    shares["other"] = np.clip(1.0 - sum(shares.values()), 0.0, None)
    return shares


def plot_time(iterations: np.ndarray, metrics: dict[str, np.ndarray], out: Path) -> bool:
    """``time.png``: phase shares of each iteration and its seconds; False if untimed."""
    if not any(key in metrics for _, key in PHASES):
        return False
    import matplotlib.pyplot as plt

    shares = phase_shares(metrics, len(iterations))
    fig, (share_ax, seconds_ax) = plt.subplots(
        1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [1.4, 1]}
    )
    share_ax.stackplot(iterations, *shares.values(), labels=list(shares))
    share_ax.set_ylim(0, 1)
    share_ax.set_xlabel("CFR iteration")
    share_ax.set_ylabel("share of the iteration")
    # Reversed, so that the legend stacks like the areas; outside, so that it hides none.
    handles, labels = share_ax.get_legend_handles_labels()
    share_ax.legend(
        handles[::-1], labels[::-1], fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1)
    )
    x, y = _present(iterations, metrics.get("time/iteration_s"))
    if len(x):
        seconds_ax.plot(x, y, marker="o", markersize=3)
    seconds_ax.set_xlabel("CFR iteration")
    seconds_ax.set_ylabel("iteration wall-clock (s)")
    _save(fig, out / "time.png")
    return True


def _present(iterations: np.ndarray, values: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The iterations at which ``values`` is not nan, and those values."""
    if values is None:
        return iterations[:0], iterations[:0].astype(float)
    keep = ~np.isnan(values)
    return iterations[keep], values[keep]


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


PLOTS = {
    "eval.png": plot_eval,
    "exploitability.png": plot_exploitability,
    "losses.png": plot_losses,
    "time.png": plot_time,
}


def report(run_dir: Path, out: Path | None = None) -> dict[str, Path | None]:
    """Draw every plot of :data:`PLOTS` for a run; ``{file: path or None if skipped}``.

    ``out`` defaults to ``report/`` beside the metrics file.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    metrics_files = find_metrics_files(run_dir)
    out = metrics_files[-1].parent / "report" if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    iterations, metrics = read_metrics(metrics_files)
    return {
        name: out / name if plot(iterations, metrics, out) else None for name, plot in PLOTS.items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m lostcities_cfr report",
        description="Plot a run's metrics.csv (CSVLogger) as PNG files: win rates with 95%% "
        "intervals, exploitability, losses and phase time shares per CFR iteration.",
    )
    parser.add_argument(
        "run_dir",
        type=Path,
        help="the run's log folder (holding metrics.csv), or a folder above it: the newest "
        "metrics.csv below it is used, merged with its sibling version_N folders' (a "
        "resumed run's earlier starts)",
    )
    parser.add_argument("--out", type=Path, default=None, help="where the PNGs go (RUN_DIR/report)")
    args = parser.parse_args(argv)
    try:
        sources = find_metrics_files(args.run_dir)
        written = report(args.run_dir, args.out)
    except FileNotFoundError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    iterations, _ = read_metrics(sources)
    span = f"iterations {iterations.min()}-{iterations.max()}" if len(iterations) else "none"
    print(f"{span} from {', '.join(str(p) for p in sources)}")
    for name, path in written.items():
        print(f"{name:20} {path if path else 'skipped: the run logged none of its metrics'}")
