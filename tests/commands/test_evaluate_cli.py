"""``python -m lostcities_cfr evaluate``: the JSON and table outputs and clear errors."""

import json

import pytest
import torch

from lostcities_cfr.agents import HeuristicAgent
from lostcities_cfr.commands import main as cli_main
from lostcities_cfr.commands.evaluate import main
from lostcities_cfr.evaluation.arena import evaluate


@pytest.fixture(autouse=True)
def restore_torch_threads():
    """The command sets torch's thread count for the process; give it back to other tests."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_json_output_is_the_evaluation_of_the_named_agents(capsys):
    # Two deterministic agents: the figures depend on the deals (--seed) alone.
    main(["--agent", "heuristic:cautious", "--opponent", "heuristic", "--games", "20", "--json"])
    data = json.loads(capsys.readouterr().out)
    expected = evaluate(HeuristicAgent("cautious"), HeuristicAgent(), 20, seed=0).to_dict()
    for timing in ("seconds", "games_per_s"):
        assert data.pop(timing) > 0
        expected.pop(timing)
    assert data["agent"] == "heuristic:cautious" and data["opponent"] == "heuristic"
    expected["agent"], expected["opponent"] = data["agent"], data["opponent"]
    assert data == expected
    assert (data["games"], data["deals"], data["matches"]) == (20, 10, 6)
    assert data["rounds"]["wins"] + data["rounds"]["losses"] > 0


def test_table_output_is_readable_and_prints_games_per_second(capsys):
    cli_main(["evaluate", "--agent", "heuristic", "--opponent", "discard-only", "--games", "12"])
    out = capsys.readouterr().out
    assert "heuristic vs discard-only: 12 games (6 deals" in out
    assert "games/s" in out
    assert "win rate [95% CI]" in out and "three-round matches" in out


def test_same_seed_gives_the_same_json_apart_from_timing(capsys):
    argv = ["--agent", "random", "--opponent", "heuristic:noisy=0.2", "--games", "10", "--json"]
    results = []
    for _ in range(2):
        main([*argv, "--seed", "5"])
        data = json.loads(capsys.readouterr().out)
        data.pop("seconds"), data.pop("games_per_s")
        results.append(data)
    assert results[0] == results[1]


def test_an_odd_game_count_is_rounded_up_and_said_so(capsys):
    main(["--agent", "random", "--opponent", "random", "--games", "5", "--rules", "tiny"])
    captured = capsys.readouterr()
    assert "--games 5 rounded up to 6" in captured.err
    assert "6 games (3 deals" in captured.out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agent", "alphazero"], "agent spec 'alphazero': unknown kind 'alphazero'"),
        (["--agent", "random", "--opponent", "ckpt:"], "needs a path"),
        (["--agent", "random", "--games", "0"], "--games 0: play at least 1 game"),
        (["--agent", "random", "--device", "banana"], "--device 'banana' is not a device"),
        (["--agent", "random", "--device", "meta"], "--device meta: the arena runs on cpu"),
    ],
)
def test_bad_arguments_exit_with_status_2_and_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
