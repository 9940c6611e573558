"""``scripts/tools/search_table.py``: matches and timings of agents, a table, JSON, a plot, and the
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


def test_saved_results_merge_by_agent_and_opponent(search_table, tmp_path):
    def saved(name: str, opponents: dict, play_ms: float) -> dict:
        row = {"spec": "s", "play_ms_mean": play_ms, "play_ms_max": play_ms}
        return {"agents": {name: {**row, "opponents": opponents}}}

    first = {"best": {"win_rate": 0.5}, "random": {"win_rate": 0.9}}
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    files[0].write_text(json.dumps(saved("x", first, 10.0)))
    files[1].write_text(json.dumps(saved("x", {"random": {"win_rate": 1.0}}, 99.0)))
    row = search_table.merged(files)["agents"]["x"]
    assert row["play_ms_mean"] == 10.0
    assert row["opponents"] == {"best": {"win_rate": 0.5}, "random": {"win_rate": 1.0}}
