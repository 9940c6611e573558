"""``scripts/bench/calculus.py`` end to end on its smoke work: every row of the issue, measured or
marked, and no figure where nothing was measured."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench" / "calculus.py"
CHAIN = ["today", "batched", "1024x6", "dense_eval", "compile"]
EXTRAS = [
    "tensorrt",
    "compile_inference",
    "compile_training",
    "compile_512x3",
    "bf16_mixed",
    "bf16_true",
    "bf16_mixed_512x3",
    "fp16_mixed",
]
SWEEP = ["walkers_1", "walkers_2"]  # the smoke work's walkers
PREDICTED_S = {"today": 17.85, "batched": 14.0, "1024x6": 50.0, "dense_eval": 70.0, "compile": 45.0}
NO_CUDA = "not measured (no CUDA device)"


@pytest.fixture(scope="module")
def figures() -> dict:
    """The smoke run's JSON (about 20 s of CPU)."""
    command = [sys.executable, str(SCRIPT), "--smoke", "--json", "--device", "cpu", "cuda"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def numbers(rows: list[dict]) -> list[float]:
    return [value for row in rows for value in row.values() if isinstance(value, float)]


def test_every_row_of_the_issue_is_reported_on_every_device_in_order(figures):
    assert list(figures["devices"]) == ["cpu", "cuda"]
    for block in figures["devices"].values():
        assert [row["key"] for row in block["rows"]] == CHAIN + EXTRAS + SWEEP


def test_cpu_rows_are_measured_or_say_why_not(figures):
    rows = {row["key"]: row for row in figures["devices"]["cpu"]["rows"]}
    assert rows["tensorrt"]["status"].startswith("not available")
    assert rows["fp16_mixed"]["status"].startswith("not measured")
    for key in CHAIN + EXTRAS + SWEEP:
        row = rows[key]
        if key in ("tensorrt", "fp16_mixed"):
            assert row["rounds"] == [] and row["ratio"] is None and "spread" not in row
            continue
        assert row["status"] == "measured", (key, row["status"])
        (figures_of_round,) = row["rounds"]
        assert all(math.isfinite(value) for value in numbers(row["rounds"]))
        phases = ("traversal_s", "advantage_train_s", "strategy_train_s", "eval_amortized_s")
        total = sum(figures_of_round[p] for p in phases) + figures_of_round["other_s"]
        assert figures_of_round["iteration_s"] == pytest.approx(total)
        assert figures_of_round["traversal_s"] > 0 and figures_of_round["eval_s"] > 0
        assert row["limit_hits"] == []  # no compile row ran eagerly behind its label


def test_the_chain_and_the_rows_past_it_do_the_same_traversal_work(figures):
    # Iteration 1 plays the uniform strategy: the same deals and draws in every row, so
    # the same nodes, whatever the network, the batching, the compiler or the precision.
    rows = figures["devices"]["cpu"]["rows"]
    nodes = {
        row["rounds"][0]["nodes"] for row in rows if row["key"] in CHAIN + EXTRAS and row["rounds"]
    }
    assert len(nodes) == 1


def test_ratios_are_to_the_first_row_and_predictions_are_the_issues(figures):
    rows = {row["key"]: row for row in figures["devices"]["cpu"]["rows"]}
    assert rows["today"]["ratio"] == {"median": 1.0, "min": 1.0, "max": 1.0}
    batched = rows["batched"]
    ratio = batched["rounds"][0]["iteration_s"] / rows["today"]["rounds"][0]["iteration_s"]
    assert batched["ratio"]["median"] == pytest.approx(ratio)
    for key in CHAIN + EXTRAS:
        assert rows[key]["predicted_s"] == PREDICTED_S.get(key)
    assert rows["compile"]["predicted_ratio"] == pytest.approx(45.0 / 17.85)


def test_without_a_cuda_device_the_cuda_column_holds_no_figure(figures):
    cuda = figures["devices"]["cuda"]
    assert {row["status"] for row in cuda["rows"]} == {NO_CUDA}
    assert all(row["rounds"] == [] and row["ratio"] is None for row in cuda["rows"])
    assert cuda["forward"] == {"status": NO_CUDA}
    assert cuda["largest_paying"] is None


def test_forward_benchmark_times_both_presets_eager_and_compiled(figures):
    forward = figures["devices"]["cpu"]["forward"]
    entries = forward["entries"]
    assert [(e["preset"], e["batch"]) for e in entries] == [
        (preset, batch) for preset in ("512x3", "1024x6") for batch in (1, 64)
    ]
    for entry in entries:
        assert entry["compiled_status"] == "measured"
        for mode in ("eager", "compiled"):
            per_call, per_row = entry[mode]["us_per_call"], entry[mode]["us_per_row"]
            assert per_call["median"] > 0
            assert per_row["median"] == pytest.approx(per_call["median"] / entry["batch"])
    assert {(c["preset"], c["mode"]) for c in forward["crossover"]} == {
        (p, m) for p in ("512x3", "1024x6") for m in ("eager", "compiled")
    }


@pytest.fixture
def calculus(load_script):
    """The script as a module."""
    return load_script("calculus")


def test_a_compiler_that_fails_marks_its_row_failed_and_the_run_goes_on(calculus):
    work = calculus.dataclasses.replace(calculus.WORK["smoke"], compile_backend="no_such_backend")
    rows = [r for r in calculus.CHAIN if r.key in ("batched", "compile")]
    results = calculus.measure_rows(rows, work, "cpu", "default", 0, log=lambda message: None)
    assert results[0]["status"] == "measured"
    assert results[1]["status"].startswith("failed: ") and results[1]["rounds"] == []
    assert "no_such_backend" in results[1]["status"]


def test_markdown_report_has_a_line_per_row_and_marks_the_cuda_rows(figures, calculus):
    text = calculus.report(figures, markdown=True)
    chain_table = text.split("\n\n")[2].splitlines()
    assert chain_table[0].startswith("| row | traversal s |")
    assert len(chain_table) == 2 + len(CHAIN + EXTRAS)
    assert text.count(NO_CUDA) == len(CHAIN + EXTRAS + SWEEP) + 1  # the rows and the forwards


def test_a_saved_run_prints_the_same_tables_without_measuring(figures, calculus, tmp_path):
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(figures))
    command = [sys.executable, str(SCRIPT), "--from-json", str(saved), "--markdown"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == calculus.report(figures, markdown=True)
