"""The league: its pairs are kept and reused, its ratings come from them, and bad input gets
one line naming it with nothing already played lost."""

import json

import pytest

import lostcities_cfr.evaluation.league as league_module
from lostcities_cfr.commands import main
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.evaluation.league import (
    Entrant,
    PairResult,
    pair_key,
    play_league,
    spec_identity,
)
from lostcities_cfr.game import Rules

TINY = Rules.tiny()
THREE = [Entrant("r", "random"), Entrant("d", "discard-only"), Entrant("h", "heuristic")]


@pytest.fixture
def games_played(monkeypatch):
    """The pairs the league plays (agent specs), from now on."""
    played = []
    evaluate = league_module.evaluate

    def counting(agent_a, agent_b, *args, **kwargs):
        played.append((agent_a.name, agent_b.name))
        return evaluate(agent_a, agent_b, *args, **kwargs)

    monkeypatch.setattr(league_module, "evaluate", counting)
    return played


def test_entrants_are_label_equals_spec_or_a_bare_spec():
    assert Entrant.parse("h=heuristic:cautious") == Entrant("h", "heuristic:cautious")
    assert Entrant.parse("heuristic:cautious") == Entrant(
        "heuristic:cautious", "heuristic:cautious"
    )
    noisy = "heuristic:balanced:noisy=0.1"  # an option's '=' is not a label's
    assert Entrant.parse(noisy) == Entrant(noisy, noisy)
    assert Entrant.parse(f"n={noisy}") == Entrant("n", noisy)


def test_a_second_run_plays_no_game_and_an_added_agent_only_its_pairs(tmp_path, games_played):
    first = play_league(THREE[:2], tmp_path, games=20, rules=TINY)
    assert len(games_played) == 1 and not first.pairs[0].cached
    again = play_league(THREE[:2], tmp_path, games=20, rules=TINY)
    assert len(games_played) == 1  # nothing played
    assert again.pairs[0] == PairResult(**{**vars(first.pairs[0]), "cached": True})
    bigger = play_league(THREE, tmp_path, games=20, rules=TINY)
    assert sorted(games_played[1:]) == sorted(
        [("discard-only", "heuristic"), ("heuristic", "random")]
    )
    assert [p.cached for p in bigger.pairs] == [True, False, False]
    assert len(list((tmp_path / "pairs").glob("*.json"))) == 3


def test_a_pair_is_the_same_games_whatever_the_order_or_labels(tmp_path, games_played):
    forward = play_league(THREE[:2], tmp_path / "a", games=20, rules=TINY)
    backward = play_league(
        [Entrant("D", "discard-only"), Entrant("R", "random")], tmp_path / "b", games=20, rules=TINY
    )
    assert games_played == [("discard-only", "random")] * 2  # seated by spec, not by order
    (ab,), (ba,) = forward.pairs, backward.pairs
    assert (ab.a, ab.b, ba.a, ba.b) == ("r", "d", "D", "R")
    assert (ab.wins, ab.draws, ab.losses) == (ba.losses, ba.draws, ba.wins)
    assert ab.score_diff == pytest.approx(-ba.score_diff)
    # relabelled, the same folder reuses the games
    play_league(
        [Entrant("x", "random"), Entrant("y", "discard-only")], tmp_path / "a", 20, rules=TINY
    )
    assert len(games_played) == 2


def test_a_pairs_key_changes_with_what_decides_its_games(tmp_path):
    base = pair_key("random", "heuristic", 100, 0, TINY)
    assert base == pair_key("heuristic", "random", 100, 0, TINY)
    assert base != pair_key("random", "heuristic", 200, 0, TINY)
    assert base != pair_key("random", "heuristic", 100, 1, TINY)
    assert base != pair_key("random", "heuristic", 100, 0, Rules.classic())
    # a file a spec names counts by its content
    checkpoint = tmp_path / "agent.ckpt"
    checkpoint.write_bytes(b"one")
    before = spec_identity(f"ckpt:{checkpoint}:greedy")
    checkpoint.write_bytes(b"two")
    assert spec_identity(f"ckpt:{checkpoint}:greedy") != before
    assert spec_identity("heuristic:cautious") == "heuristic:cautious"


def test_ratings_follow_the_pairs(tmp_path):
    league = play_league(THREE, tmp_path, games=40, rules=Rules.classic())
    ranked = [row["label"] for row in league.ratings.to_rows()]
    assert ranked == ["h", "d", "r"]  # heuristic > discard-only > random, as every pair says


def test_an_interrupted_league_keeps_its_finished_pairs(tmp_path, monkeypatch, capsys):
    evaluate = league_module.evaluate
    calls = []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(league_module, "evaluate", interrupted_second)
    arguments = [
        "league",
        "random",
        "discard-only",
        "heuristic",
        "--rules",
        "tiny",
        "--games",
        "20",
    ]
    with pytest.raises(SystemExit) as stop:
        main([*arguments, "--out", str(tmp_path)])
    assert stop.value.code == 130
    assert "finished pairs are kept" in capsys.readouterr().err
    assert len(list((tmp_path / "pairs").glob("*.json"))) == 1
    assert not list((tmp_path / "pairs").glob("*.tmp"))
    monkeypatch.setattr(league_module, "evaluate", evaluate)
    main([*arguments, "--out", str(tmp_path)])
    assert "3 pairs (2 played now, 1 from" in capsys.readouterr().err


def test_the_command_writes_results_and_plots(tmp_path, capsys):
    out = tmp_path / "league"
    main(["league", "r=random", "h=heuristic", "--rules", "tiny", "--games", "20",
          "--out", str(out), "--json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert [row["label"] for row in summary["ratings"]] == ["h", "r"]
    assert summary["ratings"][0]["spec"] == "heuristic"
    assert summary["pairs"][0]["games"] == 20
    for name in ("pairs.csv", "ratings.csv", "league.json", "win_rates.png", "ratings.png"):
        assert (out / name).stat().st_size > 0


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        (["random"], "a league needs at least two agents; got 1: ['random']"),
        (["random", "nonsense"], "agent spec 'nonsense': unknown kind 'nonsense'"),
        (["random", "best"], "agent 'best' plays classic rules"),
        (["a=random", "a=heuristic"], "league labels must differ; given more than once: ['a']"),
    ],
)
def test_bad_input_gets_one_line_naming_it_and_loses_no_played_pair(
    tmp_path, capsys, agents, message
):
    played = ["league", "random", "heuristic", "--rules", "tiny", "--games", "20"]
    main([*played, "--out", str(tmp_path)])
    kept = sorted((tmp_path / "pairs").glob("*.json"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["league", *agents, "--rules", "tiny", "--games", "20", "--out", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert sorted((tmp_path / "pairs").glob("*.json")) == kept
    main([*played, "--out", str(tmp_path)])
    assert "(0 played now, 1 from" in capsys.readouterr().err


def test_an_output_folder_that_is_a_file_gets_one_line(tmp_path, capsys):
    target = tmp_path / "league.txt"
    target.write_text("mine")
    with pytest.raises(SystemExit) as stop:
        main(["league", "random", "heuristic", "--out", str(target)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"--out {target} is a file; name a folder") and "\n" not in err
    assert target.read_text() == "mine"


def test_the_library_refuses_before_playing(tmp_path, games_played):
    with pytest.raises(AgentSpecError, match="nonsense"):
        play_league([Entrant("r", "random"), Entrant("x", "nonsense")], tmp_path, rules=TINY)
    with pytest.raises(ConfigError, match="at least two"):
        play_league([Entrant("r", "random")], tmp_path, rules=TINY)
    assert games_played == []
