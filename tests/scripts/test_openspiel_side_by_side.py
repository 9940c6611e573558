"""``scripts/tools/openspiel_side_by_side.py --quick``: every contestant trains on Kuhn poker
as a trial of one sweep study, its evaluations in its metrics.csv; the JSON, the table and
both PNGs come out, a rerun runs nothing again, and ``report`` reads the folder."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from lostcities_cfr.commands import report
from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.run_metrics import find_metrics_files, read_metrics
from lostcities_cfr.sweeps.runner import SweepRunner

pytest.importorskip("open_spiel")
pytest.importorskip("tree")  # dm-tree: OpenSpiel's PyTorch Deep CFR imports it


def test_quick_run_measures_every_contestant_as_a_sweep_trial(load_script, tmp_path, capsys):
    # About 35 s on two idle cores: four trial processes, 2 s of training clock each.
    script = load_script("openspiel_side_by_side")
    out = tmp_path / "out"
    command = ["--quick", "--game", "kuhn_poker", "--out", str(out)]
    script.main(command)
    printed = capsys.readouterr().out
    # Each contestant is a complete trial of the study, its evaluations in its metrics.csv.
    study = script.load_sweep(out)
    trials = studies.results(study)
    params = [studies.trial_params(study, t, studies.spec_of(study)) for t in trials]
    assert sorted((p["contestant"], p["seed"]) for p in params) == [
        (c, 0) for c in sorted(script.CONTESTANTS)
    ]
    assert all(t.state == TrialState.COMPLETE for t in trials)
    for trial in trials:
        _, columns = read_metrics(find_metrics_files(Path(trial.user_attrs[studies.RUN_DIR])))
        assert {"iteration", "nash_conv", "time/elapsed_s"} <= set(columns)
        assert trial.value == pytest.approx(columns["nash_conv"][-1])
    result = json.loads((out / "side_by_side.json").read_text())
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
    for contestant in script.CONTESTANTS:
        assert f"\n{contestant} " in printed
    for name in ("nashconv_vs_seconds.png", "nashconv_vs_iterations.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG"), name
    # The same command again runs nothing (the study's trials are finished), here shown
    # --beside a copy of itself (a moved folder: its trials are read below it).
    shutil.copytree(out, tmp_path / "copy")
    script.main([*command, "--beside", str(tmp_path / "copy")])
    printed = capsys.readouterr().out
    assert "started" not in printed and "\ncopy: ours " in printed
    assert len(study.get_trials()) == len(trials)
    assert json.loads((out / "side_by_side.json").read_text())["points"] == result["points"]
    # The folder is a sweep's: report tables the contestants over seeds.
    report.main([str(out)])
    printed = capsys.readouterr().out
    for contestant in script.CONTESTANTS:
        assert f"contestant={contestant} " in printed
    # Another budget is another experiment: refused before anything trains.
    with pytest.raises(SystemExit, match="another experiment"):
        script.main([*command, "--seconds", "3"])


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


def test_trials_of_another_call_are_drawn_and_tabled_beside(load_script, tmp_path, capsys):
    script = load_script("openspiel_side_by_side")
    Point, Run = script.Point, script.Run
    # Another call's study in plain/, its one trial a stand-in that writes its evaluations.
    plain = tmp_path / "plain"
    args = script.parse_args(["--quick", "--game", "kuhn_poker", "--contestants", "ours"])
    args.out = plain
    study = script.open_sweep(args)
    rows = "iteration,nash_conv,time/elapsed_s\n1,4.0,1.0\n9,0.5,61.0\n"
    write = f"import sys; open(sys.argv[1] + '/metrics.csv', 'w').write({rows!r})"

    def stand_in(spec, params, run_dir, threads):
        return [sys.executable, "-c", write, str(run_dir)]

    spec = studies.spec_of(study)
    SweepRunner(study, spec, plain, say=lambda _: None, poll_s=0.1, command=stand_in).run()
    # (CFR+ is deterministic: its trials past the first seed are not run)
    cfr_plus = {"contestant": "cfr_plus", "seed": 0}
    assert "trial" in script.trial_command(spec, cfr_plus, plain, 1)
    assert script.trial_command(spec, {**cfr_plus, "seed": 1}, plain, 1) is None
    beside = script.beside_runs([plain])
    assert [(r.contestant, r.iterations, r.train_seconds) for r in beside] == [
        ("plain: ours", 9, 61.0)
    ]
    assert {p.contestant for p in beside[0].points} == {"plain: ours"}
    points = [Point("ours", 0, 1.0, 1, 4.0), Point("ours", 0, 61.0, 9, 0.25)]
    shown = [Run("ours", 0, 9, 61.0, 62.0, points), *beside]
    assert list(script.by_contestant(shown)) == ["ours", "plain: ours"]  # this call's first
    rows = script.table(shown, budget_s=61.0).splitlines()[1:]
    assert rows[0].split()[:2] == ["ours", "0.2500"]
    assert rows[1].split()[:3] == ["plain:", "ours", "0.5000"]
    script.plot(shown, "seconds", 0.92, "kuhn_poker", tmp_path / "beside.png")
    assert (tmp_path / "beside.png").read_bytes().startswith(b"\x89PNG")
    # A folder of no study, or of another game's, is refused before anything trains.
    for folder, found in (
        (tmp_path / "none", "no comparison's study"),
        (plain, "a comparison on kuhn_poker"),
    ):
        with pytest.raises(SystemExit):
            script.parse_args(["--game", "leduc_poker", "--beside", str(folder)])
        assert f"--beside {folder}: {found}" in capsys.readouterr().err
