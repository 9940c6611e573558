"""``sweep`` and ``report SWEEP_DIR`` end to end on a tiny real config (tiny Lost Cities
rules, two iterations a trial), and the bad input they refuse with one line and exit 2,
losing nothing of a sweep."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from tiny_training import tiny_config

from lostcities_cfr.commands.sweep import main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> list[str]:
    """A tiny Kuhn SD-CFR config's arguments: two iterations a trial."""
    path = tmp_path_factory.mktemp("config") / "tiny_sweep.yaml"
    path.write_text(yaml.safe_dump(tiny_config(Path("runs/unused"), max_epochs=2)))
    return ["--config", str(path), "--trainer.max_epochs", "2"]


def sweep(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "lostcities_cfr", "sweep", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def report(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "lostcities_cfr", "report", str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny):
    """A sweep of two seeds of Kuhn's SD-CFR, two iterations each, one at a time."""
    out = tmp_path_factory.mktemp("sweep") / "tiny"
    done = sweep(*tiny, "--seeds", "2", "--metric", "loss/strategy", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def test_a_sweep_runs_each_seed_in_its_own_run_folder_loggers_included(finished):
    out, done = finished
    assert "trial 0 complete" in done.stdout and "trial 1 complete" in done.stdout
    for n in ("0000", "0001"):
        trial = out / "trials" / n
        assert (trial / "checkpoints" / "final.ckpt").is_file()
        assert list(trial.glob("csv/version_0/metrics.csv"))  # the CSV logger followed the run
        assert list(trial.rglob("config.yaml"))  # what ran, where its first logger logs
    seeds = [yaml_seed(next((out / "trials" / n).rglob("config.yaml"))) for n in ("0000", "0001")]
    assert seeds == [0, 1]


def yaml_seed(path):
    return yaml.safe_load(path.read_text())["seed_everything"]


def test_report_gives_each_seed_and_the_figures_over_seeds(finished):
    out, _ = finished
    done = report(out)
    assert done.returncode == 0, done.stderr
    assert "loss/strategy (lower is better)" in done.stdout
    assert f"ckpt:{(out / 'trials/0000/checkpoints/final.ckpt').resolve()}" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    (setting,) = summary["settings"]
    assert setting["seeds"] == [0, 1] and len(setting["values"]) == 2
    assert setting["low"] <= setting["iqm"] <= setting["high"]
    assert setting["iqm_ci"][0] <= setting["iqm"] <= setting["iqm_ci"][1]
    assert (out / "curves.png").stat().st_size > 0


def test_report_plays_each_seeds_final_checkpoint_against_an_opponent(finished):
    out, _ = finished
    done = report(out, "--opponent", "random", "--games", "20", "--rules", "tiny")
    assert done.returncode == 0, done.stderr
    assert "win_rate vs random (20 duplicate games, seed 2026)" in done.stdout
    (strength,) = json.loads((out / "strength.json").read_text())
    (setting,) = strength["settings"]
    assert setting["seeds"] == [0, 1]
    assert all(0.0 <= v <= 1.0 for v in setting["values"])


def test_report_gives_the_final_checkpoints_as_agent_specs_for_a_league(finished, tmp_path):
    out, _ = finished
    done = report(out, "--specs")
    assert done.returncode == 0, done.stderr
    specs = done.stdout.split()
    assert specs == [
        f"ckpt:{(out / f'trials/{n}/checkpoints/final.ckpt').resolve()}" for n in ("0000", "0001")
    ]
    # a run's folder has no trials to list
    refused = report(tmp_path, "--specs")
    assert refused.returncode == 2 and "--specs" in refused.stderr


def test_rerunning_a_finished_sweep_runs_nothing_again(finished, tiny):
    out, _ = finished
    done = sweep(*tiny, "--seeds", "2", "--metric", "loss/strategy", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "started" not in done.stdout and "2 complete" in done.stdout


def test_a_sweep_folder_of_another_experiment_is_refused_and_kept(finished, tiny):
    out, _ = finished
    before = (out / "study.db").read_bytes()
    # more seeds would grow it (test_runner.py); another iteration budget is another experiment
    args = [*tiny, "--trainer.max_epochs", "3", "--seeds", "2", "--metric", "loss/strategy"]
    done = sweep(*args, "--out", str(out))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert (
        "is a sweep of another experiment: overrides ['--trainer.max_epochs', '2', '--trainer.max_epochs', '3']"
        in line
    )
    assert (out / "study.db").read_bytes() == before


@pytest.mark.parametrize(
    "args, named",
    [
        (["--set", "model.no_such_field=1,2"], "no_such_field"),
        (["--storage", "postgresql+psycopg2://nobody@127.0.0.1:9/none"], "--storage postgresql"),
        (["--jobs", "0"], "--jobs 0"),
        (["--seeds", "two"], "--seeds two"),
        (["--jobz", "2"], "--jobz"),
        (
            ["--search", "model.learning_rate=0.1:0.01", "--trials", "2", "--metric", "m"],
            "LOW must be below HIGH",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path, capsys, tiny, args, named):
    # in this process (the one case fit must judge starts fit --print_config): the same
    # main as the command line's, without a Python start per case
    with pytest.raises(SystemExit) as exit_info:
        main([*tiny, "--out", str(tmp_path / "s"), *args])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("python -m lostcities_cfr sweep: error:") and named in line
    assert not (tmp_path / "s" / "trials").exists()  # nothing ran
