"""The sweep's runner with stand-in fits: every point runs once, failures are recorded and
the sweep goes on, a killed worker's trials run again and finished ones never, and two
workers share one study (SQLite here; PostgreSQL in test_shared_study.py)."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from stand_in import HERE, POLL_S, command

from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.runner import SweepRunner
from lostcities_cfr.sweeps.spec import SweepSpec
from lostcities_cfr.sweeps.summary import summarize


def config(tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text("seed_everything: 0\n")
    return str(path)


def point(trial) -> dict:
    """A finished trial's parameters: a grid point's fixed values, or a search's draw."""
    return {**trial.system_attrs.get("fixed_params", {}), **trial.params}


def ledger_lines(ledger: Path, kind: str) -> Counter:
    """How often each point started or ended (``kind``)."""
    if not ledger.exists():
        return Counter()
    words = [line.split() for line in ledger.read_text().splitlines()]
    return Counter(" ".join(w[1:3]) for w in words if w[0] == kind)


def test_a_grid_runs_every_point_once_and_records_a_failure_without_stopping(tmp_path):
    spec = SweepSpec(
        configs=[config(tmp_path)], seeds=[0, 1], grid={"model.x": ["1", "fail"]}, metric="score"
    )
    study = studies.open_study(spec, "grid", studies.storage_url(str(tmp_path)))
    ledger = tmp_path / "ledger"
    SweepRunner(
        study, spec, tmp_path, jobs=2, say=lambda _: None, poll_s=POLL_S, command=command(ledger)
    ).run()

    trials = studies.results(study)
    assert sorted((point(t)["seed"], point(t)["model.x"], t.state) for t in trials) == [
        (0, "1", TrialState.COMPLETE),
        (0, "fail", TrialState.FAIL),
        (1, "1", TrialState.COMPLETE),
        (1, "fail", TrialState.FAIL),
    ]
    assert sorted(t.value for t in trials if t.value is not None) == [1.0, 11.0]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert all(t.user_attrs["error"] == "model.x=fail: not a number" for t in failed)
    assert set(ledger_lines(ledger, "start").values()) == {1}
    # each trial ran in a folder of its own, which the report reads back
    summary = summarize(study)
    assert [s.setting for s in summary.settings] == ["model.x=1", "model.x=fail"]
    assert summary.settings[0].values == [1.0, 11.0] and summary.settings[1].unfinished == 2
    assert {t.iterations for t in summary.trials if t.state == "COMPLETE"} == {4}
    # a sweep folder moved (or copied) elsewhere: its trials are found under it
    (tmp_path / "moved").mkdir()
    (tmp_path / "trials").rename(tmp_path / "moved" / "trials")
    assert {t.iterations for t in summarize(study).trials if t.state == "COMPLETE"} == {0}
    moved = summarize(study, tmp_path / "moved").trials
    assert {t.iterations for t in moved if t.state == "COMPLETE"} == {4}
    assert all(t.run_dir.startswith(str(tmp_path / "moved")) for t in moved)


def test_a_search_reports_each_iteration_and_runs_its_number_of_trials(tmp_path):
    spec = SweepSpec(
        configs=[config(tmp_path)],
        search={"model.x": studies_range()},
        trials=3,
        metric="score",
    )
    study = studies.open_study(spec, "search", studies.storage_url(str(tmp_path)))
    SweepRunner(
        study, spec, tmp_path, say=lambda _: None, poll_s=POLL_S, command=command(tmp_path / "l")
    ).run()
    trials = studies.results(study)
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    for t in trials:  # the value at each iteration went to the pruner, the last is the result
        assert sorted(t.intermediate_values) == [1, 2, 3, 4]
        assert t.value == pytest.approx(point(t)["model.x"])


def test_a_trial_its_command_gives_none_is_closed_unrun_and_left_out(tmp_path):
    # a deterministic solver's seeds past the first (scripts/tools/openspiel_side_by_side.py)
    spec = SweepSpec(
        configs=[config(tmp_path)], seeds=[0, 1], grid={"model.x": ["1", "2"]}, metric="score"
    )
    study = studies.open_study(spec, "unrun", studies.storage_url(str(tmp_path)))
    ledger = tmp_path / "ledger"
    fit = command(ledger)

    def once_for_x2(spec, params, run_dir, threads):
        if params["model.x"] == "2" and params["seed"] != spec.seeds[0]:
            return None
        return fit(spec, params, run_dir, threads)

    for _ in range(2):  # the second run finds nothing to do
        SweepRunner(
            study, spec, tmp_path, jobs=2, say=lambda _: None, poll_s=POLL_S, command=once_for_x2
        ).run()
    assert ledger_lines(ledger, "start") == Counter(["seed=0 x=1", "seed=1 x=1", "seed=0 x=2"])
    trials = studies.results(study)
    assert sorted((point(t)["model.x"], point(t)["seed"]) for t in trials) == [
        ("1", 0),
        ("1", 1),
        ("2", 0),
    ]
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len(list((tmp_path / "trials").iterdir())) == 3  # no folder for the unrun one
    assert [s.seeds for s in summarize(study).settings] == [[0, 1], [0]]


def studies_range():
    from lostcities_cfr.sweeps.spec import SearchRange

    return SearchRange(1.0, 5.0)


STARTED: list[subprocess.Popen] = []  # workers a failing test may leave running


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test():
    yield
    while STARTED:
        worker = STARTED.pop()
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def start_worker(url, out, name, cfg, seeds, jobs, ledger, iterations, sleep, grace=5):
    args = [url, out, name, cfg, seeds, jobs, ledger, iterations, sleep, grace]
    STARTED.append(subprocess.Popen([sys.executable, str(HERE), "worker", *map(str, args)]))
    return STARTED[-1]


def wait_for(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_sweep_resumes_losing_only_its_running_trials(tmp_path):
    url, ledger = studies.storage_url(str(tmp_path)), tmp_path / "ledger"
    cfg = config(tmp_path)
    worker = start_worker(url, tmp_path, "killed", cfg, 4, 2, ledger, 20, 0.1)
    # two finished, two running: the moment to kill it
    wait_for(
        lambda: (
            sum(ledger_lines(ledger, "end").values()) >= 2
            and sum(ledger_lines(ledger, "start").values()) >= 4
        )
    )
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    finished_before = ledger_lines(ledger, "end")
    running_pids = [
        int(line.split()[-1])
        for line in ledger.read_text().splitlines()
        if line.startswith("start")
    ]
    time.sleep(0.5)
    # the trials died with their worker: no process of theirs is left to race the retry
    assert not [pid for pid in running_pids if _alive(pid)]

    worker = start_worker(url, tmp_path, "killed", cfg, 4, 2, ledger, 20, 0.1)
    assert worker.wait(timeout=120) == 0
    ended = ledger_lines(ledger, "end")
    assert sorted(ended) == [f"seed={s} x=0" for s in range(4)]
    assert set(ended.values()) == {1}  # none ran to its end twice
    assert all(ledger_lines(ledger, "start")[p] == 1 for p in finished_before)
    study = studies.load_study("killed", url)
    assert sorted(point(t)["seed"] for t in studies.results(study)) == [0, 1, 2, 3]
    assert all(t.state == TrialState.COMPLETE for t in studies.results(study))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of the killed worker's is dead too
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def two_workers_share(url: str, tmp_path: Path, name: str) -> None:
    """Two workers at once on one study: every trial runs exactly once between them."""
    ledger, cfg = tmp_path / "ledger", config(tmp_path)
    # no worker dies here: the default grace period, so that a loaded machine's late
    # heartbeat is not taken for a dead worker's
    grace = studies.GRACE_S
    workers = [
        start_worker(url, tmp_path, name, cfg, 6, 1, ledger, 3, 0.05, grace) for _ in range(2)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    assert ledger_lines(ledger, "start") == Counter({f"seed={s} x=0": 1 for s in range(6)})
    study = studies.load_study(name, url)
    assert sorted(point(t)["seed"] for t in studies.results(study)) == list(range(6))


def test_two_workers_share_a_study_in_a_file_database(tmp_path):
    two_workers_share(studies.storage_url(str(tmp_path)), tmp_path, "shared")


OPEN_TOGETHER = """
import sys, time
from pathlib import Path
from lostcities_cfr.sweeps import study
folder, me, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
(folder / f"ready{me}").touch()
while len(list(folder.glob("ready*"))) < n:  # all imported: open at once
    time.sleep(0.001)
study.open_storage(study.storage_url(str(folder)))
"""


def test_workers_opening_an_empty_database_together_all_get_it(tmp_path):
    """Each creates Optuna's tables and one CREATE wins; the others retry, not fail (a CI
    run lost one worker of the shared-study test to this race)."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_TOGETHER, str(tmp_path), str(i), "4"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    errors = [w.communicate(timeout=120)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0, 0], errors


@pytest.mark.skipif(
    "LOSTCITIES_TEST_POSTGRES" not in os.environ,
    reason="no PostgreSQL server: .ci/run starts one (source .ci/postgres.sh)",
)
def test_two_workers_share_a_study_on_a_postgresql_server(tmp_path):
    name = f"shared_{os.getpid()}_{time.time_ns()}"  # the server outlives one test run
    two_workers_share(os.environ["LOSTCITIES_TEST_POSTGRES"], tmp_path, name)


def test_a_metric_the_run_never_logs_stops_the_sweep_naming_it(tmp_path):
    spec = SweepSpec(configs=[config(tmp_path)], seeds=[0, 1, 2], metric="scroe")
    study = studies.open_study(spec, "typo", studies.storage_url(str(tmp_path)))
    runner = SweepRunner(
        study, spec, tmp_path, say=lambda _: None, poll_s=POLL_S, command=command(tmp_path / "l")
    )
    runner.run()
    assert runner.stop_reason.startswith("--metric scroe: the run never logged it")
    assert "such as score" in runner.stop_reason
    # one trial told why; the others wait for a rerun with the right metric... in a new sweep
    states = Counter(t.state for t in studies.results(study))
    assert states == Counter({TrialState.FAIL: 1, TrialState.WAITING: 2})


def test_a_trial_made_in_a_race_for_the_last_waiting_one_is_closed_unrun(tmp_path, monkeypatch):
    spec = SweepSpec(configs=[config(tmp_path)], seeds=[0], metric="score")
    study = studies.open_study(spec, "race", studies.storage_url(str(tmp_path)))
    taken = studies.claim(study, spec)  # this worker takes the only trial
    assert taken is not None
    # another worker saw it waiting just before: its ask makes a trial afresh
    real = study.get_trials
    monkeypatch.setattr(
        study, "get_trials", lambda **kw: [taken] if kw.get("states") else real(**kw)
    )
    assert studies.claim(study, spec) is None
    monkeypatch.undo()
    assert [t.number for t in studies.results(study)] == [taken.number]
    unused = [t for t in study.get_trials() if t.user_attrs.get(studies.UNUSED)]
    assert [t.state for t in unused] == [TrialState.FAIL]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_gives_the_running_trials_back_at_once(tmp_path, stop):
    url, ledger = studies.storage_url(str(tmp_path)), tmp_path / "ledger"
    worker = start_worker(url, tmp_path, "interrupted", config(tmp_path), 2, 2, ledger, 100, 0.1)
    wait_for(lambda: sum(ledger_lines(ledger, "start").values()) == 2)
    time.sleep(1.5)  # both trials beating
    worker.send_signal(stop)
    assert worker.wait(timeout=60) != 0
    study = studies.load_study("interrupted", url)
    states = Counter(t.state for t in study.get_trials())
    # each running trial closed (no result, no error line) and enqueued again for a rerun
    assert states == Counter({TrialState.FAIL: 2, TrialState.WAITING: 2})
    assert studies.results(study) and all(
        t.state == TrialState.WAITING for t in studies.results(study)
    )
    assert ledger_lines(ledger, "end") == Counter()


def test_a_search_stops_the_trials_its_pruner_prunes(tmp_path):
    from lostcities_cfr.sweeps.spec import SearchRange

    spec = SweepSpec(
        configs=[config(tmp_path)],
        search={"model.x": SearchRange(1.0, 5.0)},
        trials=4,
        metric="score",
    )
    study = studies.open_study(spec, "pruned", studies.storage_url(str(tmp_path)))
    ledger = tmp_path / "ledger"
    runner = SweepRunner(
        study,
        spec,
        tmp_path,
        jobs=2,
        say=lambda _: None,
        command=command(ledger, iterations=30, sleep=0.1),
        poll_s=POLL_S,
        pruner=optuna.pruners.ThresholdPruner(upper=1.5),  # a score above 1.5: stop
    )
    runner.run()
    trials = studies.results(study)
    assert len(trials) == 4
    for t in trials:  # a score rises to x over the run: above 2.5, it crosses 1.5 by 60%
        if point(t)["model.x"] > 2.5:
            assert t.state == TrialState.PRUNED
            assert f"seed=0 x={point(t)['model.x']!r}" not in ledger_lines(ledger, "end")
        elif point(t)["model.x"] <= 1.5:
            assert t.state == TrialState.COMPLETE
    assert any(t.state == TrialState.PRUNED for t in trials)


def test_more_seeds_grow_a_finished_sweep_running_only_the_new_ones(tmp_path):
    url, ledger = studies.storage_url(str(tmp_path)), tmp_path / "ledger"
    for seeds in ([0, 1], [0, 1, 2, 3]):
        spec = SweepSpec(configs=[config(tmp_path)], seeds=seeds, metric="score")
        study = studies.open_study(spec, "grown", url)
        SweepRunner(
            study, spec, tmp_path, say=lambda _: None, poll_s=POLL_S, command=command(ledger)
        ).run()
    assert ledger_lines(ledger, "start") == Counter({f"seed={s} x=0": 1 for s in range(4)})
    assert studies.spec_of(study).seeds == [0, 1, 2, 3]


def test_a_trial_another_worker_took_over_is_stopped_and_not_told(tmp_path):
    url, ledger = studies.storage_url(str(tmp_path)), tmp_path / "ledger"
    spec = SweepSpec(configs=[config(tmp_path)], seeds=[0], metric="score")
    study = studies.open_study(spec, "taken", url)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if line.startswith("trial 0 started"):  # another worker found it stale and failed it
            studies.load_study("taken", url).tell(0, state=TrialState.FAIL)

    runner = SweepRunner(
        study, spec, tmp_path, say=say, poll_s=POLL_S, command=command(ledger, 200, 0.05)
    )
    runner.run()  # returns: no traceback, nothing left running
    assert lines[-1].startswith("trial 0 stopped: another worker took it over")
    assert not runner.running and not ledger_lines(ledger, "end")  # stopped before its end
    assert studies.load_study("taken", url).trials[0].state == TrialState.FAIL
