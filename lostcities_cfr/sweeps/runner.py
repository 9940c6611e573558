"""Running a sweep's trials: each a ``fit`` in a process and a run folder of its own.

One worker runs up to ``jobs`` trials at once, each on ``threads`` torch threads, and polls
them: it beats each trial's heartbeat in the study (from a thread of its own), reads the metric the run logs each
iteration from its ``metrics.csv`` (a search reports it to Optuna's pruner, which may stop
the trial), and closes the trial when its process ends: COMPLETE with the metric's last
value, or FAIL with the run's error line. A trial's processes die with the worker
(``PR_SET_PDEATHSIG`` on Linux), so a killed sweep leaves no run behind that the retry would
race.

Each trial's W&B run (offline, as every run) has the sweep as its group
(``WANDB_RUN_GROUP``); its config, the whole ``fit`` config as every run's, holds its seed
(``seed_everything``) and its settings, so a dashboard groups a setting's seeds into one band.
"""

from __future__ import annotations

import ctypes
import difflib
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import optuna
from optuna.trial import TrialState

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.sweeps.spec import SEED, SweepSpec, setting_label

POLL_S = 1.0  # how often running trials are looked at
TRIALS_DIR = "trials"
FIT_LOG = "fit.log"
# A run's metrics a sweep's result may be, in this order, when --metric is not given.
DEFAULT_METRICS = ("nash_conv",)
FINAL_WIN_RATE = re.compile(r"^eval/[^/]+/[^/]+/win_rate$")
ERROR_LINE = re.compile(r"(error|Error|Exception|Killed)")

# A trial's command from (spec, params, run_dir, threads); None: the trial is not run.
Command = Callable[[SweepSpec, dict[str, Any], Path, int], list[str] | None]


def fit_command(spec: SweepSpec, params: dict[str, Any], run_dir: Path, threads: int) -> list[str]:
    """``python -m lostcities_cfr fit`` of one trial, in ``run_dir`` on ``threads`` threads."""
    return [
        sys.executable,
        "-m",
        "lostcities_cfr",
        "fit",
        *spec.fit_args(params),
        "--trainer.default_root_dir",
        str(run_dir),
        "--threads",
        str(threads),
    ]


def check_fit_args(spec: SweepSpec) -> None:
    """Refuse a sweep whose trials ``fit`` would refuse (an unknown ``--set`` name, a config
    that does not parse), before any trial starts: ``fit --print_config`` of its first
    trial, which parses everything and runs nothing.

    Raises:
        ConfigError: ``fit``'s own error line.
    """
    params: dict[str, Any] = {name: values[0] for name, values in spec.grid.items()}
    params |= {name: r.low for name, r in spec.search.items()}
    params[SEED] = spec.seeds[0]
    command = [sys.executable, "-m", "lostcities_cfr", "fit", *spec.fit_args(params)]
    done = subprocess.run([*command, "--print_config"], capture_output=True, text=True, env=_env(1))
    if done.returncode != 0:
        raise ConfigError(f"the trials' fit refuses its arguments: {error_line(done.stderr)}")


def error_line(output: str) -> str:
    """The line of a failed run's output that says why: ``fit``'s own ``error:`` line, a
    traceback's last line, or else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    ours = [line for line in lines if ": error: " in line]
    if ours:
        return ours[-1].split(": error: ", 1)[1]
    found = [line for line in lines[-40:] if ERROR_LINE.search(line)]
    return (found or lines or ["no output"])[-1]


def final_metric(columns: dict[str, np.ndarray], metric: str | None) -> tuple[str, float]:
    """``(name, last value)`` of ``metric`` in a run's metrics, or of the default one.

    Raises:
        ConfigError: the run never logged it (names the closest metrics it did log).
    """
    names = [metric] if metric else [m for m in DEFAULT_METRICS if m in columns]
    if not metric and not names:
        # the final evaluation's: the win rate logged last (at the run's end)
        rates = [n for n in columns if FINAL_WIN_RATE.match(n) and _last(columns[n])[0] >= 0]
        names = sorted(rates, key=lambda n: -_last(columns[n])[0])[:1]
    if not names or names[0] not in columns or _last(columns[names[0]])[0] < 0:
        logged = sorted(n for n in columns if _last(columns[n])[0] >= 0)
        close = difflib.get_close_matches(metric or "win_rate", logged, n=4, cutoff=0.3)
        what = f"--metric {metric}" if metric else "the default metric (nash_conv, or a win rate)"
        raise ConfigError(
            f"{what}: the run never logged it; it logged {len(logged)} metrics"
            + (f", such as {', '.join(close)}" if close else "")
        )
    return names[0], _last(columns[names[0]])[1]


def _last(values: np.ndarray) -> tuple[int, float]:
    """(index, value) of the last logged value, (-1, nan) if none."""
    present = np.flatnonzero(~np.isnan(values))
    return (int(present[-1]), float(values[present[-1]])) if len(present) else (-1, math.nan)


@dataclass
class RunningTrial:
    """A trial this worker runs: its process and what it has logged so far."""

    trial: optuna.Trial
    params: dict[str, Any]
    run_dir: Path
    process: subprocess.Popen
    log: IO[str]
    started: float = field(default_factory=time.monotonic)
    iteration: int = 0
    value: float = math.nan
    reported: int = 0  # the last iteration told to the pruner

    def stop(self) -> None:
        """End the run's process (and its children) and close its log."""
        _stop(self.process)
        self.log.close()


class SweepRunner:
    """Runs a study's trials, ``jobs`` at a time, until none is left anywhere.

    Args:
        study, spec: the sweep (:func:`~lostcities_cfr.sweeps.study.open_study`).
        out: the sweep's folder; trial N runs in ``out/trials/N``.
        jobs: trials at once.
        threads: torch threads of each trial.
        prune_after: iterations a search trial runs before the pruner may stop it.
        say: where progress lines go.
        status_every: seconds between two status lines of the running trials.
        command: builds a trial's command (:func:`fit_command`; tests run small stand-ins).
            A trial it gives None is closed unrun and left out of the results (a
            deterministic solver's seeds past the first).
        poll_s: seconds between two looks at the running trials.
        pruner: stops a search's poor trials early (None: Optuna's median pruner, which stops
            a trial whose metric at an iteration is worse than the median of the trials
            before it at that iteration, once 3 have finished and past ``prune_after``).
    """

    def __init__(
        self,
        study: optuna.Study,
        spec: SweepSpec,
        out: Path,
        jobs: int = 1,
        threads: int = 1,
        prune_after: int = 3,
        say: Callable[[str], None] = print,
        status_every: float = 60.0,
        command: Command = fit_command,
        poll_s: float = POLL_S,
        pruner: optuna.pruners.BasePruner | None = None,
    ) -> None:
        self.study, self.spec, self.out = study, spec, out
        self.jobs, self.threads, self.say = jobs, threads, say
        self.status_every, self.command, self.poll_s = status_every, command, poll_s
        median = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=prune_after)
        study.pruner = pruner or median
        self.running: list[RunningTrial] = []
        self.stop_reason: str | None = None  # set when no more trials should start

    def run(self) -> None:
        """Start and watch trials until the study has none waiting or running. Ctrl-C, or
        SIGTERM (a job scheduler's stop), stops this worker's trials and gives them back to
        the study (enqueued again)."""
        last_status = time.monotonic()
        previous = signal.signal(signal.SIGTERM, _interrupt)
        beats = Heartbeats(self.study, lambda: [r.trial for r in self.running])
        beats.start()
        try:
            while True:
                for running in list(self.running):
                    try:
                        self._poll(running)
                    except optuna.exceptions.UpdateFinishedTrialError:
                        self._taken_over(running)
                while self.stop_reason is None and len(self.running) < self.jobs:
                    trial = studies.claim(self.study, self.spec)
                    if trial is None:
                        break
                    self._start(trial)
                if not self.running and (self.stop_reason or not studies.unfinished(self.study)):
                    return
                if time.monotonic() - last_status >= self.status_every:
                    self.say(self.status())
                    last_status = time.monotonic()
                time.sleep(self.poll_s)
        except KeyboardInterrupt:
            for running in self.running:
                running.stop()
                studies.give_back(self.study, running.trial)
                self.say(f"trial {running.trial.number} stopped and given back to the study")
            raise
        finally:
            beats.stop.set()
            signal.signal(signal.SIGTERM, previous)

    def status(self) -> str:
        """One line: the study's counts and each running trial's iteration and metric."""
        trials = studies.results(self.study)
        counts = {s.name.lower(): sum(t.state == s for t in trials) for s in TrialState}
        shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        each = "; ".join(
            # value stays nan without --metric: which metric a run logs is known at its end
            f"#{r.trial.number} it {r.iteration}"
            + ("" if math.isnan(r.value) else f" {self.spec.metric}={r.value:.4g}")
            for r in self.running
        )
        return f"sweep: {shown or 'no trials'}" + (f" | {each}" if each else "")

    # ---- one trial ------------------------------------------------------------------------
    def _start(self, trial: optuna.Trial) -> None:
        params = studies.trial_params(self.study, trial, self.spec)
        run_dir = self.out / TRIALS_DIR / f"{trial.number:04d}"
        command = self.command(self.spec, params, run_dir, self.threads)
        if command is None:  # never run, as a trial lost in a race: out of every figure
            trial.set_user_attr(studies.UNUSED, True)
            self.study.tell(trial, state=TrialState.FAIL)
            self.say(f"trial {trial.number} not run: {_label(params)}")
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        log = (run_dir / FIT_LOG).open("w")
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(self.threads, self.study.study_name),
            preexec_fn=_die_with_parent,
        )
        trial.set_user_attr(studies.RUN_DIR, str(run_dir.resolve()))
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("command", shlex.join(command))
        self.running.append(RunningTrial(trial, params, run_dir, process, log))
        self.say(f"trial {trial.number} started: {_label(params)} -> {run_dir}")

    def _poll(self, running: RunningTrial) -> None:
        columns = self._read(running)
        code = running.process.poll()
        if code is None:
            if self._prune(running, columns):
                self._close(running, "pruned", TrialState.PRUNED)
            return
        running.log.close()
        seconds = time.monotonic() - running.started
        running.trial.set_user_attr("seconds", seconds)
        if code != 0:
            error = error_line((running.run_dir / FIT_LOG).read_text(errors="replace"))
            self._close(running, f"failed (exit {code}): {error}", error=error)
            return
        try:
            name, value = final_metric(columns, self.spec.metric)
        except ConfigError as error:
            self.stop_reason = str(error)  # every trial would fail alike
            self._close(running, f"failed: {error}", error=str(error))
            return
        running.trial.set_user_attr("metric", name)
        self._close(running, f"complete in {seconds:.0f} s: {name}={value:.4g}", value=value)

    def _taken_over(self, running: RunningTrial) -> None:
        """Another worker found this trial's heartbeat older than the grace period (this
        machine stalled, or its database was locked that long), failed it and enqueued it
        again: its retry stands for it, so this run stops and its result is not told."""
        running.stop()
        self.running.remove(running)
        self.say(
            f"trial {running.trial.number} stopped: another worker took it over, its heartbeat "
            "having been older than the grace period"
        )

    def _read(self, running: RunningTrial) -> dict[str, np.ndarray]:
        """The run's metrics so far ({} before its first iteration), noting its progress."""
        try:
            iterations, columns = read_metrics(find_metrics_files(running.run_dir))
        except (FileNotFoundError, OSError, ValueError):
            return {}
        if len(iterations):
            running.iteration = int(iterations[-1])
        values = columns.get(self.spec.metric or "", np.array([]))
        present = ~np.isnan(values)
        if present.any():
            running.value = float(values[present][-1])
            for step, value in zip(iterations[present], values[present], strict=True):
                if step > running.reported:
                    running.trial.report(float(value), int(step))
                    running.reported = int(step)
        return columns

    def _prune(self, running: RunningTrial, columns: dict[str, np.ndarray]) -> bool:
        if not self.spec.is_search or not running.reported:
            return False
        if not running.trial.should_prune():
            return False
        running.stop()
        return True

    def _close(
        self,
        running: RunningTrial,
        outcome: str,
        state: TrialState = TrialState.COMPLETE,
        value: float | None = None,
        error: str | None = None,
    ) -> None:
        self.running.remove(running)
        if error is not None:
            studies.fail(self.study, running.trial, error)
        else:
            self.study.tell(running.trial, value, state=state)
        self.say(f"trial {running.trial.number} {outcome}")


class Heartbeats(threading.Thread):
    """Beats the heartbeat of each trial this worker runs, every heartbeat interval, in a
    thread of its own: the main loop may wait longer than the grace period (a stopped trial's
    process given 30 s to end, a locked database), and its trials must not look dead then.

    Args:
        study: the sweep's study.
        trials: the trials running now (called at each beat).
    """

    def __init__(self, study: optuna.Study, trials: Callable[[], list[optuna.Trial]]) -> None:
        super().__init__(daemon=True, name="sweep-heartbeats")
        self.study, self.trials = study, trials
        self.stop = threading.Event()

    def run(self) -> None:
        interval = studies.heartbeat_interval(self.study)
        while not self.stop.wait(interval):
            for trial in self.trials():
                try:
                    studies.heartbeat(self.study, trial)
                except Exception as error:  # SQLAlchemy's: a locked or lost database
                    # a missed beat is retried at the next; a trial whose beats stay lost
                    # past the grace period is run again elsewhere, which loses no result
                    print(
                        f"sweep: heartbeat of trial {trial.number} failed: {error}", file=sys.stderr
                    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _label(params: dict[str, Any]) -> str:
    return f"seed={params[SEED]} {setting_label(params)}".removesuffix(" config")


def _env(threads: int, group: str | None = None) -> dict[str, str]:
    """A trial's environment: one BLAS/OpenMP pool of ``threads``, W&B offline unless the
    user said otherwise, and the sweep as the W&B run's group (W&B's own variable)."""
    env = dict(os.environ)
    env.setdefault("WANDB_MODE", "offline")
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if group is not None:
        env["WANDB_RUN_GROUP"] = group
    return env


def _die_with_parent() -> None:
    """In the trial's process before it runs: SIGKILL it when the worker dies (Linux)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _stop(process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM (``fit`` ends between iterations), then SIGKILL past ``timeout_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
