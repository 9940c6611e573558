"""A sweep's figures over seeds: what ``python -m lostcities_cfr report SWEEP_DIR`` prints
and writes.

- per trial (one seed of one setting): its state, iterations, seconds, its result (the
  sweep's metric, last value) and its final checkpoint, which ``evaluate`` and ``league``
  take as ``ckpt:PATH``;
- per setting: the seeds' median, their interquartile mean with a 95% stratified-bootstrap
  interval (:mod:`~lostcities_cfr.sweeps.statistics`), the lowest and highest seed;
- between settings: the probability that a run of one ends better than a run of the other,
  with its interval;
- ``curves.png``: the metric against iterations and against seconds, each setting's median
  over seeds with a band from its lowest to its highest seed.

``summary.json`` holds every figure for machines.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from lostcities_cfr.sweeps import statistics
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.sweeps.runner import TRIALS_DIR
from lostcities_cfr.sweeps.spec import SEED, SweepSpec, setting_label

SUMMARY_FILE = "summary.json"
CURVES_FILE = "curves.png"
FINAL_CHECKPOINT = "checkpoints/final.ckpt"


@dataclass
class TrialResult:
    """One trial as the report shows it."""

    number: int
    state: str
    seed: int
    setting: str
    value: float | None
    metric: str | None
    iterations: int | None
    seconds: float | None
    run_dir: str | None
    checkpoint: str | None
    error: str | None


@dataclass
class SettingFigures:
    """One setting's result over its seeds."""

    setting: str
    seeds: list[int]
    values: list[float]
    median: float
    iqm: float
    iqm_ci: tuple[float, float]
    low: float
    high: float
    unfinished: int = 0  # its trials not complete (running, waiting, failed, pruned)


@dataclass
class Comparison:
    """``P(X better than Y)`` between two settings' seeds."""

    x: str
    y: str
    probability: float
    ci: tuple[float, float]


@dataclass
class Summary:
    study: str
    metric: str | None
    direction: str
    trials: list[TrialResult]
    settings: list[SettingFigures]
    comparisons: list[Comparison] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(_finite(asdict(self)), indent=2) + "\n"


def summarize(study: optuna.Study, folder: Path | None = None) -> Summary:
    """Every figure of :mod:`this module <lostcities_cfr.sweeps.summary>` but the curves.

    ``folder``: the sweep's folder, where its trials' folders are looked for when they are
    not where they ran (the folder copied or moved, or a relative ``--out`` read from
    another working directory).
    """
    spec = studies.spec_of(study)
    trials = [_trial_result(study, t, spec, folder) for t in studies.results(study)]
    metrics = {t.metric for t in trials if t.metric}
    metric = spec.metric or (metrics.pop() if len(metrics) == 1 else None)
    return _over_seeds(study.study_name, metric, spec.better(metric or ""), trials)


def _over_seeds(
    study: str, metric: str | None, direction: str, trials: list[TrialResult]
) -> Summary:
    """Each setting's figures over its complete trials, and every pair of settings compared."""
    settings = []
    for label in dict.fromkeys(t.setting for t in trials):  # in the order trials ran
        mine = [t for t in trials if t.setting == label]
        done = [t for t in mine if t.state == "COMPLETE" and t.value is not None]
        values = np.array([t.value for t in done], dtype=float)
        settings.append(
            SettingFigures(
                setting=label,
                seeds=[t.seed for t in done],
                values=values.tolist(),
                median=float(np.median(values)) if len(values) else math.nan,
                iqm=float(statistics.iqm(values)) if len(values) else math.nan,
                iqm_ci=statistics.iqm_interval(values),
                low=float(values.min()) if len(values) else math.nan,
                high=float(values.max()) if len(values) else math.nan,
                unfinished=len(mine) - len(done),
            )
        )
    higher = direction == "maximize"
    comparisons = [
        Comparison(
            x.setting,
            y.setting,
            float(statistics.probability_of_improvement(x.values, y.values, higher)),
            statistics.improvement_interval(np.array(x.values), np.array(y.values), higher),
        )
        for x, y in itertools.combinations(settings, 2)
        if x.values and y.values
    ]
    return Summary(study, metric, direction, trials, settings, comparisons)


def evaluate_checkpoints(
    summary: Summary, opponent: str, games: int = 1000, seed: int = 2026, rules: str = "classic"
) -> Summary:
    """Each complete trial's final checkpoint against ``opponent`` in ``games`` duplicate
    games (the same deals for every trial), and the win rates' figures over seeds: a Lost
    Cities sweep's strength, measured as ``evaluate`` does.

    Raises:
        LostCitiesError: a bad opponent spec, or checkpoints of other rules than ``rules``.
    """
    from lostcities_cfr.agents import agent_from_spec
    from lostcities_cfr.evaluation.arena import evaluate
    from lostcities_cfr.game.rules import Rules

    measured = []
    for trial in summary.trials:
        value = None
        if trial.state == "COMPLETE" and trial.checkpoint is not None:
            agent = agent_from_spec(f"ckpt:{trial.checkpoint}", seed=2 * seed + 1)
            result = evaluate(
                agent,
                agent_from_spec(opponent, seed=2 * seed + 2),
                games,
                Rules.preset(rules),
                seed,
            )
            value = result.rounds.win_rate
        # a complete trial whose checkpoint is gone is unmeasured; others keep their state
        unmeasured = trial.state == "COMPLETE" and value is None
        measured.append(
            replace(trial, value=value, state="UNMEASURED" if unmeasured else trial.state)
        )
    metric = f"win_rate vs {opponent} ({games} duplicate games, seed {seed})"
    return _over_seeds(summary.study, metric, "maximize", measured)


def _trial_result(
    study: optuna.Study, trial: optuna.trial.FrozenTrial, spec: SweepSpec, folder: Path | None
) -> TrialResult:
    params = studies.trial_params(study, trial, spec)
    # a waiting retry inherits its dead predecessor's attributes, that run's folder among them
    waiting = trial.state == TrialState.WAITING
    run_dir = None if waiting else _found(trial.user_attrs.get(studies.RUN_DIR), folder)
    iterations = None
    if run_dir is not None:
        try:
            logged, _ = read_metrics(find_metrics_files(Path(run_dir)))
            iterations = int(logged[-1]) if len(logged) else 0
        except FileNotFoundError:
            iterations = 0
    checkpoint = Path(run_dir) / FINAL_CHECKPOINT if run_dir else None
    return TrialResult(
        number=trial.number,
        state=trial.state.name,
        seed=int(params[SEED]),
        setting=setting_label(params),
        value=trial.value if trial.state == TrialState.COMPLETE else None,
        metric=trial.user_attrs.get("metric", spec.metric),
        iterations=iterations,
        seconds=trial.user_attrs.get("seconds"),
        run_dir=run_dir,
        checkpoint=str(checkpoint) if checkpoint and checkpoint.is_file() else None,
        error=trial.user_attrs.get(studies.ERROR)
        or (
            f"its worker died {studies.MAX_RETRIES + 1} times"
            if trial.state == TrialState.FAIL
            else None
        ),
    )


def format_summary(summary: Summary) -> str:
    """The tables a person reads: per trial, per setting, and the comparisons."""
    better = "higher" if summary.direction == "maximize" else "lower"
    lines = [f"sweep {summary.study!r}: {summary.metric or 'no result yet'} ({better} is better)"]
    lines += [
        "",
        f"{'trial':>5}  {'seed':>4}  {'setting':<36} {'state':<9} {'iters':>5} {'min':>6}  result",
    ]
    for t in summary.trials:
        minutes = "" if t.seconds is None else f"{t.seconds / 60:.1f}"
        result = f"{t.value:.4g}" if t.value is not None else (t.error or "")
        lines.append(
            f"{t.number:>5}  {t.seed:>4}  {t.setting[:36]:<36} {t.state.lower():<9} "
            f"{t.iterations if t.iterations is not None else '':>5} {minutes:>6}  {result}"
        )
    lines += [
        "",
        f"{'setting':<36} {'seeds':>5}  {'median':>8}  {'IQM [95% CI]':<28} {'lowest':>8} {'highest':>8}",
    ]
    for s in summary.settings:
        interval = (
            f"[{s.iqm_ci[0]:.4g}, {s.iqm_ci[1]:.4g}]"
            if len(s.values) >= 2
            else ("one seed: no interval" if s.values else "no result yet")
        )
        pending = f"  ({s.unfinished} not complete)" if s.unfinished else ""
        lines.append(
            f"{s.setting[:36]:<36} {len(s.values):>5}  {s.median:>8.4g}  {s.iqm:<8.4g} {interval:<19} "
            f"{s.low:>8.4g} {s.high:>8.4g}{pending}"
        )
    if summary.comparisons:
        lines += ["", f"probability of improvement ({better} {summary.metric}), 95% CI:"]
        for c in summary.comparisons:
            lines.append(
                f"  P({c.x} better than {c.y}) = {c.probability:.2f} [{c.ci[0]:.2f}, {c.ci[1]:.2f}]"
            )
    checkpoints = [t.checkpoint for t in summary.trials if t.checkpoint]
    if checkpoints:
        lines += ["", "final checkpoints (agent specs for evaluate, league and nashconv):"]
        lines += [f"  ckpt:{path}" for path in checkpoints]
    return "\n".join(lines)


def plot_curves(summary: Summary, path: Path) -> bool:
    """``curves.png``: the metric against iterations and against seconds, per setting the
    median over seeds and a band from the lowest to the highest seed; False if no trial
    logged the metric."""
    if summary.metric is None:
        return False
    import matplotlib.pyplot as plt

    fig, (by_iteration, by_seconds) = plt.subplots(1, 2, figsize=(12, 4.5))
    drawn = False
    for setting in summary.settings:
        runs = [_curve(t, summary.metric) for t in summary.trials if t.setting == setting.setting]
        runs = [r for r in runs if r is not None]
        if not runs:
            continue
        drawn = True
        label = f"{setting.setting} ({len(runs)} seeds)"
        iterations = np.unique(np.concatenate([r[0] for r in runs]))
        values = np.full((len(runs), len(iterations)), np.nan)  # [seeds, I]
        for row, (its, _, vals) in enumerate(runs):
            values[row, np.searchsorted(iterations, its)] = vals
        _band(by_iteration, iterations, values, label)
        timed = [r for r in runs if r[1] is not None]
        if timed:
            end = min(float(r[1][-1]) for r in timed)
            grid = np.linspace(0.0, end, 100)
            on_grid = np.array([np.interp(grid, s, v, left=np.nan) for _, s, v in timed])
            _band(by_seconds, grid / 60, on_grid, label)
    if not drawn:
        plt.close(fig)
        return False
    by_iteration.set_xlabel("iteration")
    by_seconds.set_xlabel("minutes (this machine's)")
    for ax in (by_iteration, by_seconds):
        ax.set_ylabel(summary.metric)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    if not by_seconds.lines:
        by_seconds.text(
            0.5,
            0.5,
            "the runs logged no clock:\ntime/iteration_s (PhaseTimer) or time/elapsed_s",
            ha="center",
            va="center",
            transform=by_seconds.transAxes,
        )
    fig.suptitle(f"{summary.study}: median over seeds, band lowest to highest seed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _band(ax: Any, x: np.ndarray, values: np.ndarray, label: str) -> None:
    """Median over the rows of ``values [seeds, X]`` and a band from the lowest to the
    highest, where at least half the seeds have a value."""
    present = (~np.isnan(values)).sum(axis=0) * 2 >= len(values)
    if not present.any():
        return
    x, values = x[present], values[:, present]
    (line,) = ax.plot(x, np.nanmedian(values, axis=0), label=label)
    ax.fill_between(
        x, np.nanmin(values, axis=0), np.nanmax(values, axis=0), alpha=0.2, color=line.get_color()
    )


def _curve(
    trial: TrialResult, metric: str
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray] | None:
    """(iterations, seconds or None, values) at which ``trial`` logged ``metric``."""
    if trial.run_dir is None:
        return None
    try:
        iterations, columns = read_metrics(find_metrics_files(Path(trial.run_dir)))
    except FileNotFoundError:
        return None
    values = columns.get(metric)
    if values is None:
        return None
    elapsed = columns.get("time/elapsed_s")
    if elapsed is None and "time/iteration_s" in columns:
        elapsed = np.cumsum(np.nan_to_num(columns["time/iteration_s"]))
    keep = ~np.isnan(values)
    seconds = None if elapsed is None else elapsed[keep]
    if seconds is not None and np.isnan(seconds).any():
        seconds = None
    return iterations[keep], seconds, values[keep]


def _finite(value: Any) -> Any:
    """``value`` with NaN as null (JSON has no NaN), tuples as lists."""
    if isinstance(value, dict):
        return {key: _finite(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _found(run_dir: str | None, folder: Path | None) -> str | None:
    """A trial's folder: where it ran, else its namesake under the sweep's ``folder``."""
    if run_dir is None or folder is None or Path(run_dir).is_dir():
        return run_dir
    moved = folder / TRIALS_DIR / Path(run_dir).name
    return str(moved) if moved.is_dir() else run_dir


def write_report(
    study: optuna.Study, out: Path, folder: Path | None = None
) -> tuple[Summary, dict[str, Path | None]]:
    """Write ``summary.json`` and ``curves.png`` in ``out``; the summary and what was written.
    ``folder``: the sweep's (:func:`summarize`)."""
    import matplotlib

    matplotlib.use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(study, folder)
    (out / SUMMARY_FILE).write_text(summary.to_json())
    curves = out / CURVES_FILE
    return summary, {
        SUMMARY_FILE: out / SUMMARY_FILE,
        CURVES_FILE: curves if plot_curves(summary, curves) else None,
    }
