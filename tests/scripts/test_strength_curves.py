"""``scripts/tools/strength_curves.py``: evaluation points placed at the run's clock, a resumed
run's versions merged, a table and a PNG."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

COLUMNS = [
    "iteration",
    "time/elapsed_s",
    "eval/policy/random/win_rate",
    "eval/policy/random/win_rate_ci_low",
    "eval/policy/random/win_rate_ci_high",
]


@pytest.fixture
def strength_curves(load_script):
    """The script as a module."""
    return load_script("strength_curves")


def write_version(run_dir: Path, version: int, rows: list[list[object]]) -> None:
    path = run_dir / "csv" / f"version_{version}" / "metrics.csv"
    path.parent.mkdir(parents=True)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS)
        writer.writerows(rows)


def test_points_sit_at_the_run_clock_and_a_resumed_version_replaces_the_interrupted_one(
    strength_curves, tmp_path, capsys
):
    run_dir = tmp_path / "ppo"
    # iteration 2 logged its clock, was interrupted before its evaluation, and logged again
    write_version(run_dir, 0, [[1, 60, "", "", ""], [2, 120, 0.5, 0.4, 0.6]])
    write_version(run_dir, 1, [[2, 150, 0.7, 0.6, 0.8], [3, 210, "", "", ""]])
    out = tmp_path / "curves.png"
    strength_curves.main([str(run_dir), "--labels", "PPO", "--out", str(out), "--json"])
    points = json.loads(capsys.readouterr().out)
    assert points == [
        {
            "run": "PPO",
            "policy": "policy",
            "opponent": "random",
            "iteration": 2,
            "minutes": 2.5,
            "win_rate": 0.7,
            "ci_low": 0.6,
            "ci_high": 0.8,
        }
    ]
    assert out.read_bytes().startswith(b"\x89PNG")


def test_the_table_has_a_row_per_evaluation_with_its_interval(strength_curves, tmp_path, capsys):
    run_dir = tmp_path / "run"
    write_version(run_dir, 0, [[10, 30, 0.25, 0.2, 0.3], [20, 90, 0.5, 0.45, 0.55]])
    strength_curves.main([str(run_dir), "--out", str(tmp_path / "c.png")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "policy", "iter", "min", "random"]
    assert lines[1].split() == ["run", "policy", "10", "0.5", "25.0%", "[20.0,", "30.0]"]
    assert lines[2].split() == ["run", "policy", "20", "1.5", "50.0%", "[45.0,", "55.0]"]


def test_a_folder_without_csv_logs_exits_with_one_line_naming_it(strength_curves, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        strength_curves.main([str(tmp_path), "--out", str(tmp_path / "c.png")])
    assert exit_info.value.code == 2


def test_best_checkpoint_selection_points_are_drawn_as_a_policy_of_their_own(
    strength_curves, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    path = run_dir / "csv" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    path.write_text(
        "iteration,time/elapsed_s,best/average:greedy/cautious/win_rate,"
        "best/average:greedy/cautious/win_rate_ci_low,best/average:greedy/cautious/win_rate_ci_high,"
        "best/iteration\n10,60,0.4,0.37,0.43,10\n"
    )
    strength_curves.main([str(run_dir), "--out", str(tmp_path / "c.png"), "--json"])
    [point] = json.loads(capsys.readouterr().out)
    assert (point["policy"], point["opponent"], point["win_rate"]) == (
        "average:greedy (selection)",
        "cautious",
        0.4,
    )
