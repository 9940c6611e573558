"""``scripts/search_table.py``: matches and timings of agents, a table, JSON, a plot, and the
same from saved JSON."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def search_table(load_script):
    return load_script("search_table")


def test_plays_times_and_plots_agents_and_rereads_its_json(search_table, tmp_path, capsys):
    agents = [
        "--agent",
        "search:random@1=search:random:worlds=1:max_deck=4",
        "--agent",
        "random=random",
    ]
    common = ["--opponent", "discard-only", "--games", "4", "--positions", "2"]
    search_table.main([*agents, *common, "--json", "--plot", str(tmp_path / "a.png")])
    results = json.loads(capsys.readouterr().out)
    row = results["agents"]["search:random@1"]
    assert (
        row["spec"] == "search:random:worlds=1:max_deck=4"
        and row["play_ms_max"] >= row["play_ms_mean"] > 0
    )
    match = row["opponents"]["discard-only"]
    assert match["games"] == 4 and 0 <= match["ci"][0] <= match["win_rate"] <= match["ci"][1]
    assert match["match_ms_per_decision"] > 0
    assert (tmp_path / "a.png").stat().st_size > 0
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps(results))
    search_table.main(["--from-json", str(saved), "--plot", str(tmp_path / "b.png")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| agent | play ms/move") and "vs discard-only" in lines[0]
    assert lines[2].startswith("| search:random@1 |") and "4 games" in lines[2]
    assert (tmp_path / "b.png").stat().st_size > 0


def test_a_bad_spec_is_one_line(search_table, capsys):
    with pytest.raises(SystemExit) as exit_info:
        search_table.main(["--agent", "x=search:nonsense", "--opponent", "random"])
    assert exit_info.value.code == 2
    assert "unknown kind 'nonsense'" in capsys.readouterr().err
