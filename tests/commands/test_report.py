import csv
import math
import os
from pathlib import Path

import numpy as np
import pytest

from lostcities_cfr.commands.report import main, phase_shares, report
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics


def write_metrics(path: Path, rows: list[dict[str, float]]) -> Path:
    """A metrics.csv as Lightning's CSVLogger writes it: the union of keys, blanks elsewhere."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for row in rows for k in row})
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, keys)
        writer.writeheader()
        writer.writerows(rows)
    return path


def run_rows(iterations: int = 4, exploitability: bool = True) -> list[dict[str, float]]:
    rows = []
    for i in range(1, iterations + 1):
        row = {
            "epoch": i - 1,
            "step": 10 * i,
            "iteration": i,
            "time/iteration_s": 10.0,
            "time/traversal_s": 6.0,
            "time/policy_network_s": 2.0,
            "time/memory_add_s": 1.0,
            "time/advantage_train_s": 2.0,
            "time/strategy_train_s": 1.0,
            "time/eval_s": 0.0,
            "loss/advantage_p0": 1.0 / i,
            "loss/strategy": 0.5 / i,
        }
        if i % 2 == 0:
            row["time/eval_s"] = 0.5
            for policy in ("average", "current"):
                for opponent in ("random", "heuristic:cautious"):
                    prefix = f"eval/{policy}/{opponent}/"
                    row |= {
                        prefix + "win_rate": 0.5 + 0.05 * i,
                        prefix + "win_rate_ci_low": 0.4 + 0.05 * i,
                        prefix + "win_rate_ci_high": 0.6 + 0.05 * i,
                        prefix + "score_diff": 2.0 * i,
                    }
        if exploitability:
            row["exploitability"] = 1.0 / i
        rows.append(row)
    return rows


def test_rows_of_one_iteration_are_merged_and_gaps_are_nan(tmp_path):
    path = write_metrics(
        tmp_path / "metrics.csv",
        [
            {"epoch": 0, "iteration": 1, "loss/strategy": 0.5},
            {"epoch": 0, "iteration": 1, "eval/average/random/win_rate": 0.7},
            {"epoch": 1, "loss/strategy": 0.25},  # no iteration logged: epoch + 1
        ],
    )
    iterations, metrics = read_metrics(path)
    assert iterations.tolist() == [1, 2]
    assert metrics["loss/strategy"].tolist() == [0.5, 0.25]
    assert metrics["eval/average/random/win_rate"][0] == 0.7
    assert math.isnan(metrics["eval/average/random/win_rate"][1])


def test_report_draws_every_plot_of_a_full_run(tmp_path):
    write_metrics(tmp_path / "metrics.csv", run_rows())
    written = report(tmp_path)
    assert set(written) == {"eval.png", "exploitability.png", "losses.png", "time.png"}
    for path in written.values():
        assert path.parent == tmp_path / "report"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_without_their_metrics_are_skipped(tmp_path):
    write_metrics(tmp_path / "metrics.csv", run_rows(exploitability=False))
    written = report(tmp_path, out=tmp_path / "plots")
    assert written["exploitability.png"] is None
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "eval.png",
        "losses.png",
        "time.png",
    ]


def test_phase_shares_sum_to_one_and_split_the_traversal():
    metrics = {k: np.array([v]) for k, v in run_rows(1)[0].items()}
    shares = phase_shares(metrics, 1)
    assert sum(s[0] for s in shares.values()) == pytest.approx(1.0)
    # 6 s of traversal hold 2 s of network queries and 1 s of buffer writes
    assert shares["traversal (engine, sampler)"][0] == pytest.approx(0.3)
    assert shares["policy network"][0] == pytest.approx(0.2)
    assert shares["other"][0] == pytest.approx(0.1)


def test_the_newest_metrics_file_below_a_folder_is_found_with_its_sibling_versions(tmp_path):
    other = write_metrics(tmp_path / "old_logs" / "metrics.csv", run_rows(1))
    first = write_metrics(tmp_path / "csv" / "version_0" / "metrics.csv", run_rows(1))
    resumed = write_metrics(tmp_path / "csv" / "version_10" / "metrics.csv", run_rows(1))
    second = write_metrics(tmp_path / "csv" / "version_2" / "metrics.csv", run_rows(1))
    os.utime(other, (1, 1))
    os.utime(first, (2, 2))
    assert find_metrics_files(tmp_path) == [first, second, resumed]  # by version number
    assert find_metrics_files(tmp_path / "csv" / "version_2") == [second]


def test_a_resumed_run_is_plotted_over_all_its_starts(tmp_path):
    # Killed during iteration 3 after logging part of it; the resume logs 3 to 5 again.
    rows = run_rows(5)
    write_metrics(tmp_path / "csv" / "version_0" / "metrics.csv", rows[:3])
    resumed = [{**row, "loss/strategy": 7.0} for row in rows[2:]]
    write_metrics(tmp_path / "csv" / "version_1" / "metrics.csv", resumed)
    iterations, metrics = read_metrics(find_metrics_files(tmp_path))
    assert iterations.tolist() == [1, 2, 3, 4, 5]
    assert metrics["loss/strategy"].tolist() == [0.5, 0.25, 7.0, 7.0, 7.0]  # the later start wins


def test_the_command_lists_its_files_and_explains_a_missing_log(tmp_path, capsys):
    write_metrics(tmp_path / "run" / "metrics.csv", run_rows())
    main([str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert "eval.png" in out and str(tmp_path / "run" / "report" / "time.png") in out
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "empty")])
    assert exit_info.value.code == 2
    assert "CSVLogger" in capsys.readouterr().err
