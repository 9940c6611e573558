"""``python -m lostcities_cfr report RUN_DIR|SWEEP_DIR``: PNG plots of a run, for people
without W&B, or a sweep's figures over seeds.

A sweep's folder (``sweep`` writes ``sweep.json`` in it) gets its tables over seeds, with
intervals, ``summary.json`` and ``curves.png`` (:mod:`lostcities_cfr.sweeps.summary`).

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
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lostcities_cfr.commands.sweep import SWEEP_FILE
from lostcities_cfr.errors import ConfigError, LostCitiesError
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.sweeps.study import load_study, storage_url
from lostcities_cfr.sweeps.summary import (
    evaluate_checkpoints,
    format_summary,
    summarize,
    write_report,
)

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
        "resumed run's earlier starts); or a sweep's folder (figures over seeds)",
    )
    parser.add_argument("--out", type=Path, default=None, help="where the PNGs go (RUN_DIR/report)")
    sweeps = parser.add_argument_group("a sweep's folder")
    sweeps.add_argument(
        "--opponent",
        action="append",
        default=[],
        help="play each seed's final checkpoint against this agent spec in duplicate games and "
        "give the win rates over seeds (repeatable; Lost Cities sweeps)",
    )
    sweeps.add_argument("--games", type=int, default=1000, help="duplicate games a seed (1000)")
    sweeps.add_argument("--seed", type=int, default=2026, help="seed of the deals (2026)")
    sweeps.add_argument("--rules", choices=Rules.presets(), default="classic", help="variant")
    sweeps.add_argument(
        "--specs",
        action="store_true",
        help="print only the complete trials' final checkpoints as agent specs, one a line "
        "(league $(report SWEEP_DIR --specs) plays them all)",
    )
    args = parser.parse_args(argv)
    if (args.run_dir / SWEEP_FILE).is_file():
        report_sweep(parser, args)
        return
    if args.opponent or args.specs:
        flag = "--opponent" if args.opponent else "--specs"
        parser.error(f"{flag}: {args.run_dir} is no sweep's folder (it holds no {SWEEP_FILE})")
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


def report_sweep(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Print a sweep's tables over seeds; write ``summary.json`` and ``curves.png`` in
    ``--out`` (the sweep's folder); with ``--opponent``, the final checkpoints' win rates
    over seeds too (``strength.json``)."""
    sweep_dir = args.run_dir
    out = args.out or sweep_dir
    try:
        where = json.loads((sweep_dir / SWEEP_FILE).read_text())
        study = load_study(where["study"], where["storage"] or storage_url(str(sweep_dir)))
    except (ConfigError, ValueError, KeyError) as error:
        parser.exit(2, f"{parser.prog}: error: {sweep_dir / SWEEP_FILE}: {error}\n")
    if args.specs:
        trials = summarize(study, sweep_dir).trials
        print("\n".join(f"ckpt:{t.checkpoint}" for t in trials if t.checkpoint))
        return
    summary, written = write_report(study, out, sweep_dir)
    print(format_summary(summary))
    strength = []
    for opponent in args.opponent:
        try:
            measured = evaluate_checkpoints(summary, opponent, args.games, args.seed, args.rules)
        except LostCitiesError as error:
            parser.exit(2, f"{parser.prog}: error: --opponent {opponent}: {error}\n")
        print()
        print(format_summary(measured))
        strength.append(measured)
    if strength:
        written["strength.json"] = out / "strength.json"
        (out / "strength.json").write_text(
            "[\n" + ",\n".join(m.to_json().rstrip() for m in strength) + "\n]\n"
        )
    print()
    for name, path in written.items():
        print(f"{name:20} {path if path else 'skipped: no trial logged the metric yet'}")
