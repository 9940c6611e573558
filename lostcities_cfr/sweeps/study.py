"""A sweep as an Optuna study: its storage, its trials' life, and who runs which.

The study holds the :class:`~lostcities_cfr.sweeps.spec.SweepSpec` (a user attribute) and
every trial's state, so any number of sweep processes, on one machine or several sharing a
database (``--storage``), run its trials between them, Optuna's documented way:

- A grid sweep enqueues each seed and grid point once, when the study is created; a worker
  takes a waiting trial with :meth:`optuna.Study.ask`, which moves it to RUNNING in the
  database, so two workers never take the same one. A search asks Optuna's sampler for new
  trials until it has ``trials`` of them.
- Each running trial's worker records a heartbeat. A worker that dies (SIGKILL, a lost
  machine) stops beating; the next worker to look fails its trials once they are
  :data:`GRACE_S` seconds stale, and :class:`~optuna.storages.RetryHeartbeatStaleTrialCallback`
  enqueues each again with its parameters: only what was running is lost, and a finished
  trial is never run again.
- A trial whose ``fit`` failed is told FAIL with the error line (user attribute ``error``);
  it is finished, not retried.
- A grid grows: the same command with more seeds or more grid values (and nothing else
  changed) enqueues the new points' trials; anything else is another experiment, refused.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.sweeps.spec import SEED, SweepSpec

HEARTBEAT_S = 5  # a running trial's worker writes a heartbeat this often
GRACE_S = 20  # a trial whose heartbeat is this old lost its worker: it is run again
MAX_RETRIES = 2  # a trial whose workers died this often is left failed
SCHEMA_TRIES = 5  # workers racing to create the tables of an empty database
SPEC = "spec"  # the study's user attribute holding the spec
READY = "ready"  # set once the creator has enqueued the grid: joiners wait for it
ERROR = "error"  # a failed trial's error line: finished, not retried
RUN_DIR = "run_dir"  # where a trial's fit ran
UNUSED = "unused"  # a trial asked for in a race with another worker, and never run


def storage_url(folder: str) -> str:
    """The default storage: SQLite in the sweep's folder."""
    return f"sqlite:///{folder}/study.db"


def open_study(spec: SweepSpec, name: str, url: str, grace_s: float = GRACE_S) -> optuna.Study:
    """The sweep's study in ``url``: created with ``spec`` (a grid's trials enqueued), joined
    when it exists and was made with the same spec, or grown (:meth:`SweepSpec.grows_to`).

    Args:
        spec: what the sweep runs.
        name: the study's name in the database.
        url: any database URL Optuna accepts (``sqlite:///...``, ``postgresql://...``).
        grace_s: how stale a running trial's heartbeat is before its worker counts as dead.

    Raises:
        ConfigError: the database cannot be reached, or holds a study of this name made with
            another spec (the differing fields named).
    """
    storage = open_storage(url, grace_s)
    sampler = optuna.samplers.TPESampler(seed=spec.seeds[0])  # a search's draws, reproducible
    try:
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            direction=spec.better(spec.metric or ""),
            sampler=sampler,
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
        _wait_until_ready(study)
        held = SweepSpec.from_dict(study.user_attrs[SPEC])
        differing = held.differences(spec)
        if differing and held.grows_to(spec):
            # More seeds or grid values: their trials join the study; the rest stays.
            for params in spec.points():
                if params not in held.points():
                    study.enqueue_trial(params)
            study.set_user_attr(SPEC, spec.to_dict())
            return study
        if differing:
            raise ConfigError(
                f"the study {name!r} in {url} is a sweep of another experiment: "
                f"{'; '.join(differing)}; give this sweep another --out (or --name), or "
                "rerun with the sweep's own arguments"
            ) from None
        return study
    study.set_user_attr(SPEC, spec.to_dict())
    for params in [] if spec.is_search else spec.points():
        study.enqueue_trial(params)
    study.set_user_attr(READY, True)
    return study


def held_spec(name: str, url: str) -> SweepSpec | None:
    """The spec of the sweep ``name`` in ``url``, None where there is none yet."""
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None
    return SweepSpec.from_dict(study.user_attrs[SPEC]) if SPEC in study.user_attrs else None


def load_study(name: str, url: str) -> optuna.Study:
    """An existing sweep's study, to read (``report``)."""
    storage = open_storage(url)
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ConfigError(f"{url} holds no sweep named {name!r}") from None


def open_storage(url: str, grace_s: float = GRACE_S) -> RDBStorage:
    """Optuna's database storage with heartbeats, refusing a database it cannot reach."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own lines
    # Heartbeats and stale-trial failing are marked experimental, and meant for
    # Study.optimize; a sweep runs trials in processes of their own, so it beats for them.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}

    def storage() -> RDBStorage:
        return RDBStorage(
            url,
            engine_kwargs=engine,
            heartbeat_interval=max(1, min(HEARTBEAT_S, int(grace_s) // 4)),
            grace_period=int(grace_s),
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES),
        )

    try:
        for attempt in range(SCHEMA_TRIES - 1):
            try:
                return storage()
            except sqlalchemy.exc.DBAPIError as error:
                # Workers starting together on an empty database all create Optuna's
                # tables and only one CREATE succeeds; the others find them on a retry.
                lost_race = isinstance(error, sqlalchemy.exc.IntegrityError)
                if not (lost_race or "already exists" in str(error)):
                    raise
                time.sleep(0.2 * (attempt + 1))
        return storage()
    except Exception as error:  # SQLAlchemy's errors for a bad URL, host or password
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ConfigError(f"--storage {url}: cannot be used ({reason})") from None


def spec_of(study: optuna.Study) -> SweepSpec:
    return SweepSpec.from_dict(study.user_attrs[SPEC])


def claim(study: optuna.Study, spec: SweepSpec) -> optuna.Trial | None:
    """A trial for this worker to run now, or None when none is left to start.

    Stale trials (dead workers) are failed first, which enqueues them again. A grid sweep
    runs only its enqueued trials; a search asks the sampler until it has ``trials``.
    """
    fail_stale_trials(study)
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    if not waiting and not (spec.is_search and counted(study) < (spec.trials or 0)):
        return None
    trial = study.ask()
    # At once: a trial with no heartbeat at all is never found stale (Optuna skips those).
    heartbeat(study, trial)
    if not spec.is_search and "fixed_params" not in _system_attrs(study, trial):
        # Another worker took the last waiting trial between the look and the ask: this
        # trial was made afresh. It is closed unrun and left out of every figure.
        trial.set_user_attr(UNUSED, True)
        study.tell(trial, state=TrialState.FAIL)
        return None
    return trial


def counted(study: optuna.Study) -> int:
    """Trials that stand for a setting (:func:`results`)."""
    return len(results(study, deepcopy=False))


def unfinished(study: optuna.Study) -> list[FrozenTrial]:
    """Trials still waiting or running, anyone's."""
    fail_stale_trials(study)
    return study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))


def results(study: optuna.Study, deepcopy: bool = True) -> list[FrozenTrial]:
    """The sweep's trials, each setting once: a dead worker's trial is left out where it was
    enqueued again (its retry stands for it), and so are unused ones. One left failed
    without an error line had its workers die more than :data:`MAX_RETRIES` times."""
    trials = study.get_trials(deepcopy=deepcopy)
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
    return [
        t
        for t in trials
        if not t.user_attrs.get(UNUSED)
        and not (t.state == TrialState.FAIL and ERROR not in t.user_attrs and t.number in retried)
    ]


def heartbeat(study: optuna.Study, trial: optuna.Trial) -> None:
    study._storage.record_heartbeat(trial._trial_id)


def heartbeat_interval(study: optuna.Study) -> float:
    return float(study._storage.get_heartbeat_interval() or HEARTBEAT_S)


def fail(study: optuna.Study, trial: optuna.Trial, error: str) -> None:
    """Close ``trial`` as failed with its error line: finished, not retried."""
    trial.set_user_attr(ERROR, error)
    study.tell(trial, state=TrialState.FAIL)


def give_back(study: optuna.Study, trial: optuna.Trial) -> None:
    """Close a trial this worker stops without a result (Ctrl-C): failed without an error
    line and enqueued again, as a dead worker's trial would be."""
    study.tell(trial, state=TrialState.FAIL)
    frozen = study._storage.get_trial(trial._trial_id)
    RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES)(study, frozen)


def _system_attrs(study: optuna.Study, trial: optuna.Trial) -> dict[str, Any]:
    # Optuna's own bookkeeping (an enqueued trial's fixed_params): no public accessor since 4.
    return study._storage.get_trial_system_attrs(trial._trial_id)


def _wait_until_ready(study: optuna.Study, timeout_s: float = 60.0) -> None:
    """A study another worker is creating right now: wait until its grid is enqueued."""
    deadline = time.monotonic() + timeout_s
    while not study.user_attrs.get(READY):
        if time.monotonic() > deadline:
            raise ConfigError(
                f"the study {study.study_name!r} exists but was never made ready (its creator "
                "stopped while enqueuing the grid): delete it, or its sweep folder, and rerun"
            )
        time.sleep(0.5)


def trial_params(
    study: optuna.Study, trial: optuna.Trial | FrozenTrial, spec: SweepSpec
) -> dict[str, Any]:
    """The trial's parameters: an enqueued (grid) trial's fixed values, or a search trial's
    draw from the sampler.

    A grid's values are not suggested through Optuna: its categorical distributions cannot
    change between trials, and a grown grid changes them.
    """
    if isinstance(trial, FrozenTrial):
        return dict(trial.params) or dict(trial.system_attrs.get("fixed_params", {}))
    if not spec.is_search:
        return dict(_system_attrs(study, trial)["fixed_params"])
    params: dict[str, Any] = {
        name: trial.suggest_float(name, r.low, r.high, log=r.log) for name, r in spec.search.items()
    }
    params[SEED] = trial.suggest_categorical(SEED, spec.seeds)
    return params
