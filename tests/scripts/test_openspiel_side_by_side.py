"""``scripts/tools/openspiel_side_by_side.py --quick``: every contestant trains in its own worker
process on Kuhn poker, and the JSON, the table and both PNGs come out."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, replace

import pytest

pytest.importorskip("open_spiel")
pytest.importorskip("tree")  # dm-tree: OpenSpiel's PyTorch Deep CFR imports it


def test_quick_run_measures_every_contestant(load_script, tmp_path, capsys):
    # About 30 s on two idle cores: four worker processes, 2 s of training clock each.
    script = load_script("openspiel_side_by_side")
    script.main(["--quick", "--game", "kuhn_poker", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "side_by_side.json").read_text())
    uniform = result["uniform_nash_conv"]
    assert uniform == pytest.approx(11 / 12)  # Kuhn's uniform policy: 1/4 + 2/3
    points: dict[str, list[dict]] = {}
    for point in result["points"]:
        points.setdefault(point["contestant"], []).append(point)
    assert sorted(points) == sorted(script.CONTESTANTS)
    for contestant, mine in points.items():
        assert all(p["seed"] == 0 for p in mine)
        assert all(math.isfinite(p["nash_conv"]) and p["nash_conv"] >= 0 for p in mine), mine
        assert mine[0]["iteration"] == 1  # every run is measured after its first iteration
        seconds = [p["seconds"] for p in mine]
        assert seconds == sorted(seconds), contestant
    # CFR+ ran its 100 iterations well within the budget and went far below uniform play.
    cfr_plus = points["cfr_plus"]
    assert cfr_plus[-1]["iteration"] == script.CFR_PLUS_ITERATIONS
    assert all(p["nash_conv"] < uniform for p in cfr_plus if p["iteration"] >= 3)
    assert cfr_plus[-1]["nash_conv"] < 0.05 * uniform
    # The Deep CFR runs stopped at the first iteration's end past the 2 s budget.
    for contestant in ("openspiel", "ours", "ours_adapter"):
        assert points[contestant][-1]["seconds"] >= 2.0, contestant
    runs = {run["contestant"]: run for run in result["runs"]}
    assert runs["cfr_plus"]["iterations"] == script.CFR_PLUS_ITERATIONS
    table = capsys.readouterr().out
    for contestant in script.CONTESTANTS:
        assert f"\n{contestant} " in table
    for name in ("nashconv_vs_seconds.png", "nashconv_vs_iterations.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG"), name
    # A second call with the same --out reuses every finished run (nothing trains again); one
    # with another budget reuses none of them (checked without running: the kept task differs).
    # (shown --beside a copy of themselves: the copy's rows are tabled after them)
    shutil.copytree(tmp_path / "runs", tmp_path / "copy" / "runs")
    beside = ["--beside", str(tmp_path / "copy")]
    script.main(["--quick", "--game", "kuhn_poker", "--out", str(tmp_path), *beside])
    printed = capsys.readouterr().out
    assert "reusing 4 finished runs" in printed and "\ncopy: ours " in printed
    assert json.loads((tmp_path / "side_by_side.json").read_text())["points"] == result["points"]
    config = str(script.DEFAULT_CONFIGS["kuhn_poker"])
    digest = script.config_digest("ours", config)
    task = script.Task("ours", 0, "kuhn_poker", 3.0, 0.5, config, digest)
    assert script.load_run(tmp_path / "runs", task) is None
    # Nor is a run of the same config file once its contents changed.
    task = script.Task("ours", 0, "kuhn_poker", 2.0, 0.5, config, "an older digest")
    assert script.load_run(tmp_path / "runs", task) is None
    assert script.load_run(tmp_path / "runs", replace(task, config_digest=digest)) is not None


def test_the_table_reads_the_evaluation_that_closes_each_minute(load_script):
    script = load_script("openspiel_side_by_side")
    Point, Run = script.Point, script.Run
    runs = [
        Run(
            "ours",
            seed,
            iterations=10,
            train_seconds=150.0,
            wall_seconds=160.0,
            points=[
                Point("ours", seed, 1.0, 1, 4.0),
                Point("ours", seed, 59.0, 5, 2.0 + seed),
                Point("ours", seed, 61.0, 6, 1.0),
                Point("ours", seed, 150.0, 10, 0.5 + seed),
            ],
        )
        for seed in range(3)
    ]
    lines = script.table(runs, budget_s=150.0).splitlines()
    assert lines[0].split() == [
        "contestant",
        "1",
        "min",
        "2",
        "min",
        "end",
        "train",
        "s",
        "iterations",
    ]
    # 1 min: the points at 61 s (1); 2 min: those at 150 s (0.5, 1.5, 2.5); end: the same
    assert lines[1].split() == ["ours", "1.0000", "1.5000", "1.5000", "150.0", "10"]
    x, median, low, high = script.band(runs, "iteration")
    assert list(x) == [1, 5, 6, 10]
    assert list(median) == [4.0, 3.0, 1.0, 1.5]
    assert list(low) == [4.0, 2.0, 1.0, 0.5] and list(high) == [4.0, 4.0, 1.0, 2.5]


def test_runs_kept_by_another_call_are_drawn_and_tabled_beside(load_script, tmp_path, capsys):
    script = load_script("openspiel_side_by_side")
    Point, Run = script.Point, script.Run

    def run(nash_conv: float) -> Run:
        points = [Point("ours", 0, 1.0, 1, 4.0), Point("ours", 0, 61.0, 9, nash_conv)]
        return Run("ours", 0, iterations=9, train_seconds=61.0, wall_seconds=62.0, points=points)

    plain = tmp_path / "plain"
    (plain / "runs").mkdir(parents=True)
    kept = {"task": {"game": "kuhn_poker"}, "run": asdict(run(0.5))}
    (plain / "runs" / "ours_0.json").write_text(json.dumps(kept))
    beside = script.beside_runs([plain])
    assert [r.contestant for r in beside] == ["plain: ours"]
    assert {p.contestant for p in beside[0].points} == {"plain: ours"}
    shown = [run(0.25), *beside]
    assert list(script.by_contestant(shown)) == ["ours", "plain: ours"]  # this call's first
    rows = script.table(shown, budget_s=61.0).splitlines()[1:]
    assert rows[0].split()[:2] == ["ours", "0.2500"]
    assert rows[1].split()[:3] == ["plain:", "ours", "0.5000"]
    script.plot(shown, "seconds", 0.92, "kuhn_poker", tmp_path / "beside.png")
    assert (tmp_path / "beside.png").read_bytes().startswith(b"\x89PNG")
    # A folder of no runs, or of another game's, is refused before anything trains.
    for folder, found in ((tmp_path / "none", "no kept runs"), (plain, "kuhn_poker")):
        with pytest.raises(SystemExit):
            script.parse_args(["--game", "leduc_poker", "--beside", str(folder)])
        assert f"--beside {folder}: {found}" in capsys.readouterr().err
