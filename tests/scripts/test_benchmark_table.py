"""``scripts/tools/benchmark_table.py``: one side-by-side call a (game, algorithm) on the
shipped configs, and a table a game over seeds, read from the calls' studies (here stand-in
trials that write their evaluations, so that nothing trains)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from lostcities_cfr.sweeps import study as studies
from lostcities_cfr.sweeps.runner import SweepRunner

pytest.importorskip("open_spiel")


def test_every_call_names_a_shipped_config_and_the_openspiel_calls_come_first(load_script):
    script = load_script("benchmark_table")
    args = script.parse_args(["--seconds", "60", "--seeds", "3", "--out", "/tmp/x"])
    made = script.calls(args)
    assert len(made) == len(script.GAMES) * len(script.ALGORITHMS)
    for name, argv in made:
        options = dict(zip(argv[::2], argv[1::2], strict=True))
        assert (script.side.REPO / options["--config"]).is_file(), name
        assert Path(options["--config"]).stem == name == Path(options["--out"]).name
        assert options["--game"] in script.GAMES and options["--jobs"] == "1"
        assert (options["--seconds"], options["--seeds"]) == ("60", "3")
        with_openspiel = options["--contestants"] == "openspiel,ours,cfr_plus"
        assert with_openspiel == name.endswith("_sdcfr"), name
    assert all(name.endswith("_sdcfr") for name, _ in made[: len(script.GAMES)])


def test_a_game_not_in_the_table_is_refused_by_name(load_script, capsys):
    script = load_script("benchmark_table")
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--games", "leduc_poker,go"])
    assert exit_info.value.code == 2
    assert "--games: ['go']" in capsys.readouterr().err


def test_rows_give_each_setting_its_seeds_median_interval_and_sdcfrs_odds(load_script):
    script = load_script("benchmark_table")
    Point, Run = script.side.Point, script.side.Run

    def run(name: str, seed: int, end: float) -> Run:
        points = [Point(name, seed, 1.0, 1, 2.0), Point(name, seed, 61.0, 5, 1.0)]
        points.append(Point(name, seed, 121.0, 9, end))
        return Run(name, seed, 9, 121.0, 130.0, points)

    runs = {
        "SD-CFR (ours)": [run("ours", s, 0.1 * (s + 1)) for s in range(4)],
        "PPO (ours)": [run("ours", s, 0.25 + 0.1 * s) for s in range(4)],
        "CFR+ (OpenSpiel, tabular)": [run("cfr_plus", 0, 0.01)],
    }
    rows = {row["name"]: row for row in script.game_rows(runs, 120.0)}
    sdcfr, ppo = rows["SD-CFR (ours)"], rows["PPO (ours)"]
    assert sdcfr["end"] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert sdcfr["median"] == pytest.approx(0.25) and sdcfr["iqm"] == pytest.approx(0.25)
    assert sdcfr["first_minute"] == 1.0 and sdcfr["iterations"] == 9
    # SD-CFR's seeds end below PPO's in 13 of the 16 pairs (none tie)
    x, y = np.array(sdcfr["end"]), np.array(ppo["end"])
    assert ppo["sdcfr_better"] == pytest.approx(np.mean(x[:, None] < y[None, :]))
    low, high = ppo["sdcfr_better_ci"]
    assert 0 <= low <= ppo["sdcfr_better"] <= high <= 1
    assert "sdcfr_better" not in rows["CFR+ (OpenSpiel, tabular)"]  # one run: no odds
    table = script.markdown("kuhn_poker", list(rows.values()), 120.0, 0.9167).splitlines()
    assert table[2].count("seed ") == 4
    assert table[-1].startswith("| CFR+ (OpenSpiel, tabular) | 0.01 | - | - | - | 0.01 |")
    assert "one run (deterministic)" in table[-1]


def test_the_table_reads_every_calls_study(load_script, tmp_path, capsys):
    script = load_script("benchmark_table")
    side = script.side
    args = script.parse_args(
        ["--games", "kuhn_poker", "--seeds", "2", "--seconds", "60", "--out", str(tmp_path)]
    )

    def stand_in(spec, params, run_dir, threads):  # an evaluation at 1 s and at 61 s
        if side.trial_command(spec, params, run_dir, threads) is None:
            return None  # CFR+ past the first seed, as the script skips it
        end = 0.5 if params["contestant"] == "ours" else 0.25
        end += 0.01 * params["seed"]
        rows = f"iteration,nash_conv,time/elapsed_s\n1,0.9,1.0\n7,{end},61.0\n"
        write = f"import sys; open(sys.argv[1] + '/metrics.csv', 'w').write({rows!r})"
        return [sys.executable, "-c", write, str(run_dir)]

    for _, argv in script.calls(args):
        call = side.parse_args(argv)
        study = side.open_sweep(call)
        spec = studies.spec_of(study)
        SweepRunner(study, spec, call.out, say=lambda _: None, poll_s=0.1, command=stand_in).run()
    script.tabulate(args)
    printed = capsys.readouterr().out
    figures = json.loads((tmp_path / "benchmark.json").read_text())["games"]["kuhn_poker"]
    names = [row["name"] for row in figures["rows"]]
    assert names == [
        "OpenSpiel Deep CFR",
        "SD-CFR (ours)",
        "CFR+ (OpenSpiel, tabular)",
        "ESCHER (ours)",
        "PPO (ours)",
        "MMD (ours)",
    ]
    rows = {row["name"]: row for row in figures["rows"]}
    assert rows["PPO (ours)"]["end"] == pytest.approx([0.5, 0.51])
    assert rows["OpenSpiel Deep CFR"]["end"] == pytest.approx([0.25, 0.26])
    assert rows["CFR+ (OpenSpiel, tabular)"]["seeds"] == [0]  # deterministic: one run
    assert rows["OpenSpiel Deep CFR"]["sdcfr_better"] == 0.0
    assert figures["uniform_nash_conv"] == pytest.approx(11 / 12)
    assert "| MMD (ours) | 0.5 | 0.51 |" in printed
    assert (tmp_path / "benchmark.md").read_text() in printed
    for axis in ("seconds", "iterations"):
        figure = tmp_path / "kuhn_sdcfr" / f"nashconv_vs_{axis}_all.png"
        assert figure.read_bytes().startswith(b"\x89PNG")
